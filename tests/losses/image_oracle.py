"""What the loss tests share: the seeded batches of two views, a loss run with its gradients, and (for the
image losses of test_vision.py and test_oar.py) the value and gradient checks against a float64 oracle.
Each module keeps its own hyperparameter sets, tolerances and statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from loss_oracle import value

from contrastlab.losses import build_loss


def views(seed, n, d=5, noise=0.5, scale=1.5, offsets=False, dtype=torch.float64):
    """Two views of ``n`` embeddings of dimension ``d`` drawn from ``seed`` in float64, returned in
    ``dtype``: h1 = scale · N(0, 1) (with ``offsets``, per-dimension scales 0.5 to 2 and offsets: raw
    embeddings, which VICReg and Barlow Twins do not normalise), h2 = h1 + noise · N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    if offsets:
        scale = torch.linspace(0.5, 2.0, d, dtype=torch.float64)
    h1 = scale * torch.randn(n, d, generator=g, dtype=torch.float64)
    if offsets:
        h1 = h1 + torch.randn(d, generator=g)
    h2 = h1 + noise * torch.randn(n, d, generator=g, dtype=torch.float64)
    return h1.to(dtype), h2.to(dtype)


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


def finite_differences(name, h1, h2, hp, step=1e-6):
    """dL/dh1, dL/dh2 by central differences of the float64 loop oracle's value (``h1``, ``h2``: lists)."""
    x = h1 + h2
    n = len(h1)
    grad = np.zeros((len(x), len(x[0])))
    for r in range(len(x)):
        for c in range(len(x[0])):
            up = [row[:] for row in x]
            down = [row[:] for row in x]
            up[r][c] += step
            down[r][c] -= step
            grad[r, c] = (value(name, up[:n], up[n:], hp) - value(name, down[:n], down[n:], hp)) / (2 * step)
    return grad[:n], grad[n:]


def symmetric_in_the_views(name, h1, h2):
    """Swapping the views leaves the loss as it was and swaps the gradients; returns the output."""
    out, a1, a2 = run(name, h1, h2)
    swapped, b1, b2 = run(name, h2, h1)
    torch.testing.assert_close(out.loss, swapped.loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a1, b2, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a2, b1, rtol=1e-10, atol=1e-12)
    return out
