"""Losses of Nie, Zhang & Mao 2023 (Table 1): InfoNCE, alignment & uniformity, DCL, DCL+, MPT, MET, MAT.

[0] Z. Nie, R. Zhang, Y. Mao. "On the Inadequacy of Optimizing Alignment and Uniformity in
    Contrastive Learning of Sentence Representations." ICLR 2023.
    Reference code: github.com/BDBC-KG-NLP/ICLR2023-Gradient-Dissipation (``loss.py``).

Conventions (protocol.md §1): ``z1``, ``z2`` are the L2-normalised [N, D] embeddings of the two
dropout views; ``s_ij = z1_i . z2_j``; anchors are view 1 (rows), negatives the other view's other
samples (j != i), losses are means over anchors and not symmetrised. The hardest negative is found
per row with the diagonal masked by -inf / +inf, never by multiplying with 0.

Where the released ``loss.py`` differs, this module follows protocol.md (each function says how):
the reference takes the hardest negative per *column* (``dim=0``) after *zeroing* the diagonal
for MPT/MET/MAT, has no clamps before ``sqrt``/``arccos``, and adds the constant ``2t`` to the
uniformity loss. None of these choices changes a gradient on a batch where the clamps are inactive
and no diagonal zero wins the max/min, except the row/column choice, which swaps the roles of the
two views.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import chord_distance, fill_diagonal, hardest_similarity, nearest_distance, safe_arccos

__all__ = [
    "info_nce",
    "info_nce_per_anchor",
    "alignment",
    "uniformity",
    "align_uniform",
    "dcl_per_anchor",
    "dcl",
    "dcl_plus",
    "mpt_margin",
    "mpt",
    "met_margin",
    "met",
    "mat_margin",
    "mat",
]


# --------------------------------------------------------------------------- InfoNCE
def info_nce_per_anchor(sim: Tensor, *, tau: float) -> Tensor:
    """Per-anchor InfoNCE, -log softmax(s_i. / tau)_i, from the [N, N] cross-view cosines ``sim``."""
    target = torch.arange(sim.shape[0], device=sim.device)
    return F.cross_entropy(sim / tau, target, reduction="none")


def info_nce(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """InfoNCE with in-batch cross-view negatives (the SimCSE loss).

    Implements Eq. (1) of [0] (= Li et al. 2024 L^info): mean_i -log e^{s_ii/τ} / Σ_j e^{s_ij/τ}.
    Computed as ``cross_entropy`` on the logits, matching SimCSE and the reference.

    Shapes: z1, z2 [N, D] unit rows, N >= 2. Range: tau > 0.

    >>> import torch
    >>> z = torch.eye(2)
    >>> round(info_nce(z, z, tau=1.0).item(), 4)
    0.3133
    """
    return info_nce_per_anchor(z1 @ z2.T, tau=tau).mean()


# --------------------------------------------------------------------------- alignment & uniformity
def alignment(z1: Tensor, z2: Tensor, *, alpha: float) -> Tensor:
    """L_align = mean_i ||z1_i - z2_i||^alpha (Eq. 3 of [0]; Wang & Isola 2020).

    ||z1_i - z2_i||^2 is computed as max(2 - 2 s_ii, 0) (unit rows); for alpha != 2 it is clamped
    at 1e-12 before the power so identical views give a finite gradient.

    >>> import torch
    >>> z1 = torch.tensor([[1.0, 0.0]]); z2 = torch.tensor([[0.0, 1.0]])
    >>> round(alignment(z1, z2, alpha=2.0).item(), 4)
    2.0
    """
    d2 = (2.0 - 2.0 * (z1 * z2).sum(-1)).clamp_min(0.0)
    if alpha == 2.0:
        return d2.mean()
    return d2.clamp_min(1e-12).pow(alpha / 2.0).mean()


def uniformity(z: Tensor, *, t: float) -> Tensor:
    """L_uniform of one view: log mean_{k<l} exp(-t ||z_k - z_l||^2) over same-view pairs.

    Eq. 4 of [0] writes cross-view pairs; the reference (``lunif``, ``torch.pdist``) and protocol.md
    use the N(N-1)/2 same-view pairs, as here. Computed as a ``logsumexp`` over the off-diagonal
    entries (each pair twice) minus log N(N-1), which equals the mean over k<l.

    >>> import torch
    >>> round(uniformity(torch.eye(2), t=1.0).item(), 4)
    -2.0
    """
    n = z.shape[0]
    d2 = (2.0 - 2.0 * (z @ z.T)).clamp_min(0.0)
    return torch.logsumexp(fill_diagonal(-t * d2, float("-inf")).reshape(-1), dim=0) - math.log(n * (n - 1))


def align_uniform(z1: Tensor, z2: Tensor, *, alpha: float, t: float, lam: float) -> Tensor:
    """L_{a&u} = (1 - λ) L_align + λ · ½ [L_uniform(z1) + L_uniform(z2)] (Eq. 2 of [0]).

    The uniformity term is the average over the two views' same-view uniformities, as in the
    reference ``lunif`` but without its gradient-neutral constant ``2t`` (protocol.md §1). This is a
    batch-level loss: it is not a mean of per-anchor terms.

    Ranges: alpha > 0, t > 0, 0 <= lam <= 1.

    >>> import torch
    >>> round(align_uniform(torch.eye(2), torch.eye(2), alpha=2.0, t=1.0, lam=0.5).item(), 4)
    -1.0
    """
    uni = 0.5 * (uniformity(z1, t=t) + uniformity(z2, t=t))
    return (1.0 - lam) * alignment(z1, z2, alpha=alpha) + lam * uni


# --------------------------------------------------------------------------- DCL, DCL+
def dcl_per_anchor(sim: Tensor, *, tau: float) -> Tensor:
    """Per-anchor DCL: -s_ii/τ + log Σ_{j≠i} exp(s_ij/τ) (Eq. 5 of [0]; Yeh et al. 2021)."""
    return -sim.diagonal() / tau + torch.logsumexp(fill_diagonal(sim / tau, float("-inf")), dim=-1)


def dcl(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """Decoupled contrastive loss: the positive removed from InfoNCE's denominator (Eq. 5 of [0]).

    The reference computes ``log(Σ_j exp(s_ij/τ · mask_ij) - 1)``; here a masked ``logsumexp``
    gives the same value without overflow. Range: tau > 0.

    >>> import torch
    >>> round(dcl(torch.eye(2), torch.eye(2), tau=1.0).item(), 4)
    -1.0
    """
    return dcl_per_anchor(z1 @ z2.T, tau=tau).mean()


def dcl_plus(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """DCL+ = mean over all N anchors of max(DCL_i, 0) (Eq. 10 of [0]; zeros count in the mean).

    Anchors with DCL_i <= 0 get exactly zero gradient (Eq. 11). Range: tau > 0.

    >>> import torch
    >>> dcl_plus(torch.eye(2), torch.eye(2), tau=1.0).item()
    0.0
    """
    return dcl_per_anchor(z1 @ z2.T, tau=tau).clamp_min(0.0).mean()


# --------------------------------------------------------------------------- MPT, MET, MAT
def mpt_margin(sim: Tensor, *, m: float) -> Tensor:
    """Per-anchor argument of MPT's hinge: max_{j≠i} s_ij - s_ii + m."""
    hardest, _ = hardest_similarity(sim)
    return hardest - sim.diagonal() + m


def mpt(z1: Tensor, z2: Tensor, *, m: float) -> Tensor:
    """Minimum dot-Product Triplet loss: mean_i max(0, max_{j≠i} s_ij - s_ii + m) (Eq. 13 of [0]).

    Hardest negative per row (anchor z1_i, negatives z2_j), diagonal masked with -inf. The reference
    ``margin_p_loss`` zeroes the diagonal and takes the max per column; protocol.md fixes rows.

    >>> import torch
    >>> round(mpt(torch.eye(2), torch.eye(2), m=1.5).item(), 4)
    0.5
    """
    return mpt_margin(z1 @ z2.T, m=m).clamp_min(0.0).mean()


def met_margin(sim: Tensor, *, m: float) -> Tensor:
    """Per-anchor argument of MET's hinge: d_ii - min_{j≠i} d_ij + m, d = sqrt(max(2 - 2s, 1e-4))."""
    dist = chord_distance(sim)
    nearest, _ = nearest_distance(dist)
    return dist.diagonal() - nearest + m


def met(z1: Tensor, z2: Tensor, *, m: float) -> Tensor:
    """Minimum Euclidean-distance Triplet loss (Eq. 14 of [0]).

    d_ij = sqrt(max(2 - 2 s_ij, 1e-4)) (the clamp of Li et al.'s reference; Nie's ``margin_e_loss``
    has no clamp, so its gradient is NaN for identical views); nearest negative per row.

    >>> import torch
    >>> round(met(torch.eye(2), torch.eye(2), m=1.5).item(), 4)
    0.0958
    """
    return met_margin(z1 @ z2.T, m=m).clamp_min(0.0).mean()


def mat_margin(sim: Tensor, *, m: float) -> Tensor:
    """Per-anchor argument of MAT's hinge: θ_ii - min_{j≠i} θ_ij + m·π, θ = arccos(clamped s)."""
    theta = safe_arccos(sim)
    nearest, _ = nearest_distance(theta)
    return theta.diagonal() - nearest + m * math.pi


def mat(z1: Tensor, z2: Tensor, *, m: float) -> Tensor:
    """Minimum Angle Triplet loss: mean_i max(0, θ_ii - min_{j≠i} θ_ij + m·π) (Eq. 15 of [0]).

    ``m`` is in units of π (Nie Table 2 writes 0.15π). Cosines are clamped to [-1+1e-6, 1-1e-6]
    before ``arccos`` (the reference does not clamp). Nearest negative per row.

    >>> import torch
    >>> round(mat(torch.eye(2), torch.eye(2), m=1.0).item(), 4)
    1.5722
    """
    return mat_margin(z1 @ z2.T, m=m).clamp_min(0.0).mean()


# --------------------------------------------------------------------------- registry entries
def _entry_infonce(z1: Tensor, z2: Tensor, *, tau: float):
    sim = z1 @ z2.T
    return info_nce_per_anchor(sim, tau=tau).mean(), {"align": sim.diagonal().mean()}


def _entry_align_uniform(z1: Tensor, z2: Tensor, *, alpha: float, t: float, lam: float):
    loss = align_uniform(z1, z2, alpha=alpha, t=t, lam=lam)
    return loss, {"align": (z1 * z2).sum(-1).mean()}


def _entry_dcl(z1: Tensor, z2: Tensor, *, tau: float):
    sim = z1 @ z2.T
    return dcl_per_anchor(sim, tau=tau).mean(), {"align": sim.diagonal().mean()}


def _entry_dcl_plus(z1: Tensor, z2: Tensor, *, tau: float):
    sim = z1 @ z2.T
    per = dcl_per_anchor(sim, tau=tau)
    stats = {"align": sim.diagonal().mean(), "gd_active": (per > 0).to(per.dtype).mean()}
    return per.clamp_min(0.0).mean(), stats


def _hinge_entry(margin_fn):
    def entry(z1: Tensor, z2: Tensor, *, m: float):
        sim = z1 @ z2.T
        arg = margin_fn(sim, m=m)
        stats = {"align": sim.diagonal().mean(), "gd_active": (arg > 0).to(arg.dtype).mean()}
        return arg.clamp_min(0.0).mean(), stats

    return entry


ENTRIES = {
    "infonce": _entry_infonce,
    "align_uniform": _entry_align_uniform,
    "dcl": _entry_dcl,
    "dcl_plus": _entry_dcl_plus,
    "mpt": _hinge_entry(mpt_margin),
    "met": _hinge_entry(met_margin),
    "mat": _hinge_entry(mat_margin),
}
