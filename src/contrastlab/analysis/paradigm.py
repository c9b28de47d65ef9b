"""The unified gradient paradigm of Li et al. 2024 (Eq. 4, Tables 1-2) evaluated on a batch.

For view-1 anchor i every supported loss has (up to a component along z1_i, which the normalisation's
Jacobian removes) the gradient

    dL/dz1_i = scale · GD_i · Σ_{j≠i} W_ij (n_j - R_ij z2_i),

with n_j = z2_j ("cross" negatives, Li Eq. 4) or z1_j ("same", Li App. D Eq. 12). This module
returns GD, the W rows and R per anchor so the trainer can log them and the analysis figures can use
them. Table 1: InfoNCE, ArcCon, MPT, MET; Table 2 (lower half): the modified losses, in the form
the reference code computes them (same-view GD gate; see :mod:`contrastlab.losses.li2024`), for
their view-1 term; plus the ``paradigm`` baseline (Eq. 5). ``scale`` is the batch reduction
(1/N for means, 1/(N·|active|) for ``paradigm``, 1 for sum-reduced losses) so that
:func:`paradigm_gradient` reproduces autograd exactly.

[0] M. Li, R. Zhang, Z. Nie. "Towards Better Understanding of Contrastive Sentence Representation
    Learning: A Unified Paradigm for Gradient." ACL 2024.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastlab.losses._common import (
    chord_distance,
    fill_diagonal,
    hardest_similarity,
    nearest_distance,
    offdiag_logsumexp,
    safe_arccos,
    same_view_gate,
)
from contrastlab.losses.catalog import DEFAULTS
from contrastlab.losses.li2024 import _cross_view_gate, _gram_weight

PARADIGM_LOSSES: tuple[str, ...] = (
    "infonce",
    "arccon",
    "mpt",
    "met",
    "paradigm",
    "mmhe",
    "mmhs",
    "mvicreg",
    "mbarlow_twins",
)


@dataclass(frozen=True)
class ParadigmTerms:
    """GD [N], W [N, N] (zero diagonal), R [N, N], negatives "cross" | "same", reduction ``scale``."""

    gd: Tensor
    w: Tensor
    r: Tensor
    negatives: str
    scale: float


def _one_hot_rows(index: Tensor, n: int, values: Tensor) -> Tensor:
    return F.one_hot(index, n).to(values.dtype) * values[:, None]


def _components(name: str, z1: Tensor, z2: Tensor, hp: dict) -> ParadigmTerms:
    n = z1.shape[0]
    sim = z1 @ z2.T
    pos = sim.diagonal()
    ones = torch.ones_like(sim)
    if name in ("infonce", "arccon"):
        tau = hp["tau"]
        neg_lse = offdiag_logsumexp(sim / tau, -1)
        w = torch.softmax(fill_diagonal(sim / tau, float("-inf")), dim=-1) / tau
        if name == "infonce":
            pos_logit, r = pos / tau, ones
        else:
            theta = safe_arccos(pos)
            pos_logit = torch.cos(theta + hp["u"]) / tau
            r = (torch.sin(theta + hp["u"]) / torch.sin(theta))[:, None] * ones
        gd = torch.sigmoid(neg_lse - pos_logit)  # 1 / (1 + e^{pos} / Σ_{k≠i} e^{s_ik/τ})
        return ParadigmTerms(gd, w, r, "cross", 1.0 / n)
    if name == "mpt":
        hardest, j = hardest_similarity(sim)
        gd = (pos - hardest < hp["m"]).to(sim.dtype)
        return ParadigmTerms(gd, _one_hot_rows(j, n, torch.ones_like(pos)), ones, "cross", 1.0 / n)
    if name == "met":
        dist = chord_distance(sim)
        nearest, j = nearest_distance(dist)
        gd = (nearest - dist.diagonal() < hp["m"]).to(sim.dtype)
        r = dist / dist.diagonal()[:, None]
        return ParadigmTerms(gd, _one_hot_rows(j, n, 1.0 / nearest), r, "cross", 1.0 / n)
    if name == "paradigm":
        gd = _cross_view_gate(sim, hp["m"], -1) if hp["gd"] else torch.ones_like(pos, dtype=torch.bool)
        if hp["weight"] == "exp":
            w = torch.softmax(fill_diagonal(sim / hp["tau"], float("-inf")), dim=-1)
        else:
            w = fill_diagonal(torch.full_like(sim, 1.0 / (n - 1)), 0.0)
        scale = 1.0 / (n * max(int(gd.sum()), 1))
        return ParadigmTerms(gd.to(sim.dtype), w, hp["r"] * ones, "cross", scale)

    # modified losses: view-1 term, same-view gate
    lam, r_opt = hp["lam"], hp["r"]
    gd = same_view_gate(z1, hp["m"]).to(sim.dtype) if hp["gd"] else torch.ones_like(pos)
    if name == "mmhs":
        dist = ((2.0 - 2.0 * sim).clamp_min(0.0) + 1e-4).sqrt()
        nearest, j = nearest_distance(dist)
        w = _one_hot_rows(j, n, lam / nearest)
        c = (r_opt / nearest) if r_opt is not None else torch.ones_like(pos)
        return ParadigmTerms(gd, w, (c / w.sum(-1))[:, None] * ones, "cross", 1.0 / n)
    if name == "mmhe":
        q = z1 @ z1.T
        t = hp["tau"] if hp["weight"] == "exp" else 1.0
        logits = q / t
        lower = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-1)
        log_z = torch.logsumexp(logits.masked_fill(~lower, float("-inf")).reshape(-1), dim=0)
        w = fill_diagonal((logits - log_z).exp(), 0.0) / t
        align_w = w.sum(-1) if hp["weight"] == "exp" else torch.full_like(pos, 1.0 / n)
        c = align_w * (r_opt if r_opt is not None else 1.0)
        w = lam * w
        return ParadigmTerms(gd, w, (c / w.sum(-1))[:, None] * ones, "same", 1.0)
    # mvicreg / mbarlow_twins
    g = _gram_weight(z1 if name == "mvicreg" else z2, weight=hp["weight"], tau=hp["tau"])
    w = lam * fill_diagonal(g, 0.0)
    if r_opt is not None:
        c = r_opt * w.sum(-1)
    elif name == "mvicreg":
        c = torch.full_like(pos, 2.0 / n)
    else:
        raise ValueError("mbarlow_twins with r=None has a per-dimension ratio (Li Table 2), not a scalar R")
    return ParadigmTerms(gd, w, (c / w.sum(-1))[:, None] * ones, "same", 1.0)


@torch.no_grad()
def paradigm_components(
    h1: Tensor, h2: Tensor, *, losses: tuple[str, ...] = PARADIGM_LOSSES, hp: dict | None = None
) -> dict[str, ParadigmTerms]:
    """Per-anchor GD, W rows and R of each loss in ``losses`` for the batch (h1, h2), view-1 anchors.

    ``h1``, ``h2``: raw [N, D] embeddings (normalised here). ``hp`` maps a loss name to
    hyperparameter overrides of :data:`contrastlab.losses.catalog.DEFAULTS`. Computed in float32
    (float64 inputs stay float64), detached.

    >>> import torch
    >>> t = paradigm_components(torch.eye(3), torch.eye(3), losses=("mpt",))["mpt"]
    >>> t.gd.tolist(), t.w.sum(-1).tolist()
    ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    """
    hp = hp or {}
    unknown = [name for name in losses if name not in PARADIGM_LOSSES]
    if unknown:
        raise ValueError(f"no paradigm view for {unknown}; valid names: {', '.join(PARADIGM_LOSSES)}")
    dtype = torch.float64 if h1.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=h1.device.type, enabled=False):
        z1 = F.normalize(h1.to(dtype), dim=-1)
        z2 = F.normalize(h2.to(dtype), dim=-1)
        return {name: _components(name, z1, z2, {**DEFAULTS[name], **hp.get(name, {})}) for name in losses}


def paradigm_gradient(terms: ParadigmTerms, z1: Tensor, z2: Tensor) -> Tensor:
    """scale · GD_i Σ_j W_ij (n_j - R_ij z2_i) for every anchor: the paradigm's gradient w.r.t. z1 [N, D]."""
    negatives = z2 if terms.negatives == "cross" else z1
    pull = (terms.w * terms.r).sum(-1)[:, None] * z2
    return terms.scale * terms.gd[:, None] * (terms.w @ negatives - pull)
