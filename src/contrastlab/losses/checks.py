"""The load-time check of a user loss (:mod:`.user`): it builds the loss through the registry, so it
sits above both (the registry resolves user losses through :mod:`.user`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .registry import build_loss
from .user import (
    CHECK_BATCH,
    CHECK_SEED,
    UserLoss,
    UserLossError,
    one_line,
    resolve_user_loss,
    validate_hyperparameters,
)

__all__ = ["check_user_loss"]


#: (name, hyperparameters) already checked in this process: the workflow checks each once.
_CHECKED: set[str] = set()


def _run_check(name: str, hp: Mapping[str, Any]) -> None:
    import torch

    loss_fn = build_loss(name, **hp)
    n, d = CHECK_BATCH
    g = torch.Generator().manual_seed(CHECK_SEED)
    h1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    h2 = h1 + 0.5 * torch.randn(n, d, generator=g, dtype=torch.float64)
    a, b = h1.clone().requires_grad_(), h2.clone().requires_grad_()
    where = f"on a random batch of {n}x{d}"
    try:
        out = loss_fn(a, b)
    except UserLossError:
        raise
    except Exception as error:
        raise UserLossError(f"user loss {name!r} raised {one_line(error)} {where}") from error
    value = out.loss
    if not torch.isfinite(value):
        raise UserLossError(f"user loss {name!r} returned {value.item()} {where}; it must be finite")
    if not value.requires_grad:
        raise UserLossError(
            f"user loss {name!r} {where} has no gradient w.r.t. the views; do not detach them"
        )
    value.backward()
    for view, grad in (("z1", a.grad), ("z2", b.grad)):
        if grad is None or not torch.isfinite(grad).all():
            raise UserLossError(f"user loss {name!r}: its gradient w.r.t. {view} is not finite {where}")
    user = resolve_user_loss(name)
    if user.symmetric:
        with torch.no_grad():
            swapped = loss_fn(h2, h1).loss
        if not torch.allclose(swapped, value.detach(), rtol=1e-6, atol=1e-9):
            raise UserLossError(
                f"user loss {name!r} declares symmetric=True but L(z1, z2) = {value.item():.6g} != "
                f"L(z2, z1) = {swapped.item():.6g} {where}; fix the loss or declare symmetric=False"
            )


def check_user_loss(name: str, hp: Mapping[str, Any] | None = None) -> UserLoss:
    """Import, signature, hyperparameters, a finite loss and gradient on a seeded random float64 batch
    (8 x 16, the raw views h and h + noise), and the declared symmetry L(z1, z2) = L(z2, z1).

    Raises :class:`UserLossError` with a one-line message for the first problem found.
    """
    hp = dict(hp or {})
    user = resolve_user_loss(name)
    validate_hyperparameters(user, hp)
    key = repr((name, sorted(hp.items())))
    if key not in _CHECKED:
        _run_check(name, hp)
        _CHECKED.add(key)
    return user
