"""What the image losses' oracle tests share (test_vision.py: MACL Table 9's losses; test_oar.py: OAR's
losses on raw embeddings): a loss run with its gradients, and the value and gradient checks against a
float64 oracle. Each module keeps its own batches, hyperparameter sets, tolerances and statistics."""

from __future__ import annotations

import pytest
import torch
from loss_oracle import value

from contrastlab.losses import build_loss


def run(name, h1, h2, **hp):
    """The loss's output and its gradients with respect to both views."""
    a, b = h1.clone().requires_grad_(), h2.clone().requires_grad_()
    out = build_loss(name, **hp)(a, b)
    out.loss.backward()
    return out, a.grad, b.grad


def as_lists(h):
    return h.to(torch.float64).tolist()


def value_matches_oracle(name, hp, h1, h2, tol):
    """The loss's value at ``h1, h2`` equals the oracle's (``tol``: rtol, atol) in the batch's dtype;
    returns the output and the views as float64 lists, for the module's checks of the statistics."""
    out = build_loss(name, **hp)(h1, h2)
    x1, x2 = as_lists(h1), as_lists(h2)
    assert out.loss.dtype == h1.dtype
    assert out.loss.item() == pytest.approx(value(name, x1, x2, hp), rel=tol[0], abs=tol[1])
    return out, x1, x2


def gradient_matches_oracle(name, hp, h1, h2, tol, oracle_grad):
    """Both views' gradients equal ``oracle_grad(name, x1, x2, hp)`` (``tol``: rtol, atol) in the batch's
    dtype; returns the first view's."""
    _, g1, g2 = run(name, h1, h2, **hp)
    assert g1.dtype == h1.dtype
    want1, want2 = oracle_grad(name, as_lists(h1), as_lists(h2), hp)
    torch.testing.assert_close(g1.double(), torch.from_numpy(want1), rtol=tol[0], atol=tol[1])
    torch.testing.assert_close(g2.double(), torch.from_numpy(want2), rtol=tol[0], atol=tol[1])
    return g1


def symmetric_in_the_views(name, h1, h2):
    """Swapping the views leaves the loss as it was and swaps the gradients; returns the output."""
    out, a1, a2 = run(name, h1, h2)
    swapped, b1, b2 = run(name, h2, h1)
    torch.testing.assert_close(out.loss, swapped.loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a1, b2, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a2, b1, rtol=1e-10, atol=1e-12)
    return out
