"""Shared helpers of the sentence losses: masking, hardest negatives, stable reductions, clamps.

Every helper takes already-normalised embeddings or similarity matrices; none syncs with the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

#: Cosines are clamped to [-1 + COS_EPS, 1 - COS_EPS] before ``arccos`` (protocol.md §1).
COS_EPS = 1e-6


@dataclass(frozen=True)
class LossOutput:
    """What a registry loss returns: the scalar ``loss`` and plain-float ``stats`` (empty when skipped)."""

    loss: Tensor
    stats: dict[str, float] = field(default_factory=dict)


def fill_diagonal(mat: Tensor, value: float) -> Tensor:
    """Copy of ``mat`` with its diagonal replaced by ``value`` (masking, never multiplying by 0)."""
    return mat.masked_fill(torch.eye(mat.shape[0], dtype=torch.bool, device=mat.device), value)


def offdiag_logsumexp(logits: Tensor, dim: int | None = -1) -> Tensor:
    """``logsumexp`` over the off-diagonal entries: per row (``dim=-1``), per column (``dim=0``)
    or over all N(N-1) entries (``dim=None``)."""
    masked = fill_diagonal(logits, float("-inf"))
    if dim is None:
        return torch.logsumexp(masked.reshape(-1), dim=0)
    return torch.logsumexp(masked, dim=dim)


def hardest_similarity(sim: Tensor, dim: int = -1) -> tuple[Tensor, Tensor]:
    """(max_{j != i} sim_ij, argmax) per row (``dim=-1``) or per column (``dim=0``), diagonal masked."""
    return fill_diagonal(sim, float("-inf")).max(dim=dim)


def nearest_distance(dist: Tensor, dim: int = -1) -> tuple[Tensor, Tensor]:
    """(min_{j != i} dist_ij, argmin) per row (``dim=-1``) or per column (``dim=0``), diagonal masked."""
    return fill_diagonal(dist, float("inf")).min(dim=dim)


def safe_arccos(cos: Tensor) -> Tensor:
    """``arccos`` of cosines clamped to [-1 + 1e-6, 1 - 1e-6] (finite value and gradient)."""
    return torch.arccos(cos.clamp(-1.0 + COS_EPS, 1.0 - COS_EPS))


def chord_distance(sim: Tensor, floor: float = 1e-4) -> Tensor:
    """sqrt(max(2 - 2 s, floor)): the Euclidean distance of unit vectors with cosine ``s``."""
    return (2.0 - 2.0 * sim).clamp_min(floor).sqrt()


def gated(z: Tensor, active: Tensor) -> Tensor:
    """``z`` where ``active`` (per row), ``z.detach()`` elsewhere: stops the gradient of inactive rows."""
    return torch.where(active[:, None], z, z.detach())


def same_view_gate(z: Tensor, m: float) -> Tensor:
    """Li et al.'s reference gate for the modified losses: i active iff 1 - max_{j != i} z_i.z_j < m.

    Computed on detached values; the diagonal of z z^T is taken as exactly 1 (protocol.md §1).
    """
    with torch.no_grad():
        q = z @ z.T
        hardest, _ = hardest_similarity(q)
        return (1.0 - hardest) < m
