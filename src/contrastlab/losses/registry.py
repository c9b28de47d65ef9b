"""The loss registry: ``build_loss(name, **hp)`` and the :class:`SentenceLoss` it returns (protocol.md §1).

``build_loss(name, **hp)`` validates the hyperparameters once (unknown names and invalid values raise
``ValueError`` naming them) and returns a :class:`SentenceLoss`; calling it on raw ``(h1, h2)``
returns a :class:`LossOutput` with ``.loss`` and ``.stats``. Inputs may be any float dtype and may
come from an autocast region: the loss is computed in float32 (float64 stays float64) with autocast
disabled, and the gradient flows back in the input's dtype.

>>> import torch
>>> out = build_loss("mpt", m=0.23)(torch.eye(3), torch.eye(3))
>>> round(out.loss.item(), 4), out.stats["gd_active"]
(0.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from . import li2024, macl, nie2023, oar, user, vision
from ._common import LossOutput
from .catalog import DEFAULTS, LOSS_MODULES, LOSSES, check_hyperparameters

__all__ = ["LossOutput", "SentenceLoss", "build_loss"]

_ENTRIES: dict[str, Callable] = {
    **nie2023.ENTRIES,
    **li2024.ENTRIES,
    **macl.ENTRIES,
    **vision.ENTRIES,
    **oar.ENTRIES,
}


class SentenceLoss:
    """A validated loss: ``loss_fn(h1, h2, with_stats=True) -> LossOutput``.

    ``h1``, ``h2``: raw [N, D] embeddings of the two views (N >= 2). ``stats`` holds plain floats
    (``align`` = mean s_ii, ``gd_active`` for gated losses, ``tau_a`` for MACL, ...) fetched with a
    single host transfer; ``with_stats=False`` skips it (no host-device sync). The vision losses
    (:mod:`.vision`, :mod:`.oar`: two augmented views of N images) are called the same way; the
    entries named in ``oar.RAW_INPUT`` (barlow_twins, vicreg) get the raw h1, h2, all others the
    row-normalised ones.
    """

    def __init__(self, name: str, hp: dict[str, Any], entry: Callable | None = None, raw_input: bool = False):
        self.name = name
        self.hp = dict(hp)
        self._fn = _ENTRIES[name] if entry is None else entry
        self._raw = name in oar.RAW_INPUT or raw_input

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hp.items())
        return f"SentenceLoss({self.name!r}, {args})"

    def on_views(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The scalar loss of views exactly as the entry receives them (already normalised, or raw for
        a raw-input loss): no normalisation, no dtype change (the autograd paradigm view uses it)."""
        return self._fn(x1, x2, **self.hp)[0]

    def __call__(self, h1: Tensor, h2: Tensor, with_stats: bool = True) -> LossOutput:
        if not (isinstance(h1, Tensor) and isinstance(h2, Tensor)):
            got = f"{type(h1).__name__} and {type(h2).__name__}"
            raise TypeError(f"{self.name}: h1 and h2 must be torch tensors, got {got}; use torch.as_tensor")
        if h1.ndim != 2 or h1.shape != h2.shape:
            raise ValueError(
                f"{self.name}: h1 and h2 must both be [N, D], got {tuple(h1.shape)} and {tuple(h2.shape)}"
            )
        if h1.shape[0] < 2:
            raise ValueError(f"{self.name}: needs a batch of at least 2, got N={h1.shape[0]}")
        dtype = torch.float64 if h1.dtype == torch.float64 else torch.float32
        with torch.autocast(device_type=h1.device.type, enabled=False):
            x1, x2 = h1.to(dtype), h2.to(dtype)
            if not self._raw:
                x1, x2 = F.normalize(x1, dim=-1), F.normalize(x2, dim=-1)
            loss, stats = self._fn(x1, x2, **self.hp)
        if not with_stats or not stats:
            return LossOutput(loss, {})
        keys = list(stats)
        values = torch.stack([stats[k].detach().to(torch.float64).reshape(()) for k in keys]).tolist()
        return LossOutput(loss, dict(zip(keys, values, strict=True)))


def build_loss(name: str, **hp: Any) -> SentenceLoss:
    """The loss ``name`` with hyperparameters ``hp`` over :data:`catalog.DEFAULTS` (protocol.md §1).

    Raises ``ValueError`` for an unknown loss (listing the valid names), an unknown hyperparameter
    (naming it and the valid ones) or an invalid value (naming it).

    ``name`` may also be a user loss (``"package.module:callable"``, ``"path/file.py:callable"`` or an
    entry point of the group ``contrastlab.losses``, see :mod:`.user`): its hyperparameters are the
    callable's keyword arguments, and it receives normalised or raw views as it declares.
    """
    if name not in LOSS_MODULES and user.is_user_loss(name):
        resolved = user.resolve_user_loss(name)
        hp = user.validate_hyperparameters(resolved, hp)
        built = SentenceLoss(name, hp, user.adapt(resolved), raw_input=resolved.inputs == "raw")
        user.note_loaded(resolved)
        return built
    if name not in LOSS_MODULES:
        raise ValueError(f"unknown loss {name!r}; valid names: {', '.join(LOSSES)}")
    defaults = DEFAULTS[name]
    unknown = sorted(set(hp) - set(defaults))
    if unknown:
        raise ValueError(
            f"{name}: unknown hyperparameter(s) {', '.join(unknown)}; valid: {', '.join(defaults)}"
        )
    return SentenceLoss(name, check_hyperparameters(name, {**defaults, **hp}))
