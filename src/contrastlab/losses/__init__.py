"""Sentence losses of Nie 2023, Li 2024 and MACL, and the vision losses of MACL's CIFAR-10 study and
of the OAR study, behind one registry (protocol.md §1, §3).

``build_loss(name, **hp)`` validates the hyperparameters once (unknown names and invalid values raise
``ValueError`` naming them) and returns a callable ``loss_fn(h1, h2, with_stats=True) -> LossOutput``
with ``.loss`` (scalar tensor) and ``.stats`` (plain floats). ``LOSSES``, ``LOSS_MODULES`` and
``DEFAULTS`` come from :mod:`.catalog`; importing them (or the catalog) does not import torch, the
torch-backed names are loaded on first use.

Modules: :mod:`.nie2023` (infonce, align_uniform, dcl, dcl_plus, mpt, met, mat), :mod:`.li2024`
(arccon, paradigm, mhe, mmhe, mhs, mmhs, vicreg_li, mvicreg, barlow_twins_li, mbarlow_twins, with
the Li Table 5 options ``gd`` / ``weight`` / ``r``), :mod:`.macl` (macl), :mod:`.vision` (ntxent,
flatnce, dcl_vision, dualtemp, macl_vision: MACL Table 9 / App. B.3, symmetric over the 2N batch,
temperature 0.1 for all, MACL α 0.5, A0 0, reweighting on), :mod:`.oar` (barlow_twins, vicreg: the
original vision forms on the *raw* embeddings, hyperparameters ``lam`` / ``mu`` / ``nu`` / ``gamma`` /
``eps``; and, outside the registry because they need labels, ``oar.orthonormal_anchors``,
``oar.oar_term`` and ``oar.oar_loss``; the OAR study's InfoNCE and DCL are ``ntxent`` and
``dcl_vision``). Li's GD, W and R per anchor (Tables 1-2) are an analysis, not a loss:
:mod:`contrastlab.analysis.paradigm`. A loss from the user's own code (``"package.module:callable"``,
``"path/file.py:callable"`` or an entry point of the group ``contrastlab.losses``) goes through the same
``build_loss``, see :mod:`.user`.

>>> import torch
>>> out = build_loss("mpt", m=0.23)(torch.eye(3), torch.eye(3))
>>> round(out.loss.item(), 4), out.stats["gd_active"]
(0.0, 0.0)
"""

from __future__ import annotations

import importlib
from typing import Any

from .catalog import DEFAULTS, LOSS_MODULES, LOSSES

_LAZY = {
    "build_loss": "registry",
    "SentenceLoss": "registry",
    "LossOutput": "_common",
    "contrastive_loss": "user",
    "check_user_loss": "checks",
}

__all__ = ["LOSSES", "LOSS_MODULES", "DEFAULTS", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
