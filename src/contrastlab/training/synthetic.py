"""The synthetic study of the OAR paper (OAR §3, Table 2): does a loss fuse three clusters onto a line?

§3 of [0]: three clusters in the 3-D unit ball, each a noisy line through the origin (a point and its
negation share a cluster); two views of each point by "multiplying by -1 and adding random Gaussian
noise"; a three-layer dense network with ReLU and batch normalisation, trained with InfoNCE, DCL,
VICReg and Barlow Twins. The finding (Table 2): the losses converge "to local minima near a rank-1
subspace", while the OAR term (§4, Eq. 2) keeps the clusters apart.

Here every loss is trained without and with the OAR term on 10% of the labels
(:func:`~contrastlab.losses.oar.oar_loss`), one setup for all eight runs: the paper's real-data
optimiser (§5: SGD, batch 128; the authors' code: momentum 0.9, weight decay 5e-4, cosine annealing) at
a rate of its "strong learning" regime (§5.1: 1e-2 to 1; §5.2 trains OAR at 1), and the loss constants
of the project's OAR experiments (InfoNCE τ 1, DCL τ 0.1, Barlow Twins λ 5e-3, VICReg 25/25/1). Collapse
is measured on the unit embeddings by :func:`effective_rank` (95% of Σσ², uncentred: 1 = one line
through the origin), :func:`line_energy` (σ1²/Σσ²) and the angles between the clusters' principal axes
(:func:`axis_angles`, :func:`distinct_directions`).

[0] "Stable Contrastive Learning with Orthonormal Anchors Regression" (OAR), 2024, §3-5, Table 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contrastlab.losses import build_loss
from contrastlab.losses.oar import oar_loss, orthonormal_anchors
from contrastlab.training.synthetic_settings import SyntheticSettings

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CLUSTER_DIRECTIONS",
    "SyntheticRun",
    "SyntheticSettings",
    "axis_angles",
    "cluster_axes",
    "distinct_directions",
    "effective_rank",
    "line_energy",
    "make_clusters",
    "make_network",
    "make_views",
    "seed_table",
    "study_table",
    "train_synthetic",
]

#: The three clusters' lines through the origin (rows, unit length): e_x, e_y and the diagonal
#: (1, 1, 1)/√3, i.e. 90°, 54.7° and 54.7° apart. Fixed, so every seed sees the same geometry (the
#: seed draws the points, the noise, the network, the batches and the labelled subset); not mutually
#: orthogonal, so the OAR anchors (orthonormal) are not simply the input directions.
CLUSTER_DIRECTIONS = torch.tensor(
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64
) / torch.tensor([[1.0], [1.0], [math.sqrt(3.0)]], dtype=torch.float64)


@dataclass(frozen=True)
class SyntheticRun:
    """One training of :func:`train_synthetic`: inputs, unit embeddings of every point and measures."""

    loss: str
    oar: bool
    seed: int
    x: np.ndarray  # [N, 3] input points
    labels: np.ndarray  # [N] cluster 0..2
    z: np.ndarray  # [N, 3] unit embeddings (eval-mode BatchNorm), NaN if the run diverged
    curve: np.ndarray  # [steps] training loss (the OAR term included) per step
    diverged: bool
    effective_rank: int | None
    line_energy: float
    axis_angles_deg: np.ndarray  # [3] angles between the cluster axes: (0, 1), (0, 2), (1, 2)
    min_axis_angle_deg: float
    distinct_directions: int | None
    # How the run got there: the share of steps whose gradient norm the clip cut, the largest norm seen,
    # and the loss's own terms on the last batch (VICReg: invariance, variance, covariance, each with
    # its weight; Barlow Twins: on- and off-diagonal), which say what a collapsed run is stuck against.
    clipped_share: float = float("nan")
    max_grad_norm: float = float("nan")
    terms: Mapping[str, float] = field(default_factory=dict)

    @property
    def final_loss(self) -> float:
        return float(self.curve[-1]) if len(self.curve) else float("nan")


# --------------------------------------------------------------------------- data and network
def make_clusters(
    points_per_cluster: int, noise: float, seed: int, *, min_radius: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """The §3 input: points [3n, 3] (float32, inside the unit ball) and labels [3n] (0, 1, 2).

    Cluster k is s·t·u_k + ε with u_k = :data:`CLUSTER_DIRECTIONS` [k], t ~ U(min_radius, 1), a random
    sign s (a line through the origin, not a ray: both signs are the same cluster) and ε ~ N(0, noise²
    I₃); the few points the noise pushes outside the unit ball are scaled back onto it. Deterministic
    in ``seed`` (its own generator, float64 draws).
    """
    g = torch.Generator().manual_seed(seed)
    n = points_per_cluster
    labels = torch.arange(3).repeat_interleave(n)
    t = min_radius + (1.0 - min_radius) * torch.rand(3 * n, 1, generator=g, dtype=torch.float64)
    sign = torch.randint(0, 2, (3 * n, 1), generator=g).double() * 2 - 1
    eps = noise * torch.randn(3 * n, 3, generator=g, dtype=torch.float64)
    x = sign * t * CLUSTER_DIRECTIONS[labels] + eps
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1.0)
    return x.float(), labels


def make_views(
    x: torch.Tensor, noise: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of each point (§3, "multiplying by -1 and adding random Gaussian noise"):
    x + ε₁ and -x + ε₂, ε ~ N(0, noise² I). The positive pair is a point and its negation, so a loss
    can only align them by embedding the two ends of a line together."""
    first = x + noise * torch.randn(x.shape, generator=generator)
    second = -x + noise * torch.randn(x.shape, generator=generator)
    return first, second


def make_network(hidden: int) -> nn.Sequential:
    """§3's "three-layer neural network": Linear(3, h) - BN - ReLU - Linear(h, h) - BN - ReLU -
    Linear(h, 3); 3-D embeddings so they can be plotted. Initialised from torch's global RNG (seed it)."""
    return nn.Sequential(
        nn.Linear(3, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(),
        nn.Linear(hidden, 3),
    )


def _labelled_mask(labels: torch.Tensor, fraction: float, generator: torch.Generator) -> torch.Tensor:
    """The OAR set S (§4): ceil(fraction·n_k) random points of each cluster (stratified, so with 10%
    of 600 points every cluster has 20 labels), as a bool mask [N]."""
    mask = torch.zeros(len(labels), dtype=torch.bool)
    for k in labels.unique():
        idx = torch.nonzero(labels == k).flatten()
        take = math.ceil(fraction * len(idx))
        mask[idx[torch.randperm(len(idx), generator=generator)[:take]]] = True
    return mask


@contextmanager
def _threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- collapse measures
def _matrix(z: Any) -> torch.Tensor:
    a = torch.as_tensor(
        np.asarray(z.detach().cpu() if isinstance(z, torch.Tensor) else z), dtype=torch.float64
    )
    if a.ndim != 2:
        raise ValueError(f"expected an [N, D] matrix, got shape {tuple(a.shape)}")
    return a


def effective_rank(z: Any, energy: float = 0.95, *, centre: bool = False) -> int:
    """The number of singular values of ``z`` [N, D] (array or tensor) needed to hold ``energy`` of
    Σσ²: the "effective rank (95% concentration)" of OAR Fig. 3.

    Uncentred by default, so it counts lines through the origin (§3's "rank-1 linear subspace" collapse
    is 1 whether the points sit at one end of the line or both); ``centre=True`` subtracts the column
    means first (OAR Fig. 3's spectra). An all-zero matrix gives 0; a share within 1e-12 of ``energy``
    counts as reaching it.

    >>> effective_rank([[1.0, 0.0], [-2.0, 0.0]]), effective_rank(np.eye(3))
    (1, 3)"""
    if not 0.0 < energy <= 1.0:
        raise ValueError(f"energy must be in (0, 1], got {energy}")
    a = _matrix(z)
    if centre:
        a = a - a.mean(dim=0)
    sigma2 = torch.linalg.svdvals(a).pow(2)
    total = float(sigma2.sum())
    if total == 0.0:
        return 0
    share = sigma2.cumsum(0) / total
    return int((share < energy - 1e-12).sum()) + 1


def line_energy(z: Any) -> float:
    """σ1²/Σσ² of ``z`` [N, D] (uncentred): the share of the energy on the best line through the
    origin; 1 = every row on one line (§3's rank-1 over-fusion), 1/D = isotropic."""
    sigma2 = torch.linalg.svdvals(_matrix(z)).pow(2)
    return float(sigma2[0] / sigma2.sum())


def cluster_axes(z: Any, labels: Any) -> torch.Tensor:
    """Each cluster's principal axis [K, D] (clusters in sorted label order): the top right singular
    vector of its *unit* embeddings, uncentred, so the axis is the line through the origin that best
    fits the cluster (a point and its negation fit it equally: the axis has no sign)."""
    unit = F.normalize(_matrix(z), dim=1)
    labels = torch.as_tensor(np.asarray(labels))
    return torch.stack(
        [torch.linalg.svd(unit[labels == k], full_matrices=False).Vh[0] for k in labels.unique()]
    )


def axis_angles(z: Any, labels: Any) -> np.ndarray:
    """The angles (degrees, 0-90) between the clusters' principal axes (:func:`cluster_axes`), one
    per pair (i < j, row-major), as arccos |cos|: sign-invariant, like §3's "small minimum angle"
    notion of proximity. 0 = two clusters on one line (fused), 90 = orthogonal lines."""
    axes = cluster_axes(z, labels)
    cos = (axes @ axes.T).abs().clamp(max=1.0)
    i, j = torch.triu_indices(len(axes), len(axes), offset=1)
    return np.degrees(torch.arccos(cos[i, j]).numpy())


def distinct_directions(z: Any, labels: Any, min_angle_deg: float = 30.0) -> int:
    """How many distinct directions the clusters keep: clusters whose axes are less than
    ``min_angle_deg`` apart (:func:`axis_angles`) are merged, transitively (single linkage), and the
    groups counted. 3 = the three clusters on three lines, 1 = all fused onto one line (§3)."""
    from scipy.sparse.csgraph import connected_components

    axes = cluster_axes(z, labels)
    close = np.degrees(torch.arccos((axes @ axes.T).abs().clamp(max=1.0)).numpy()) < min_angle_deg
    return int(connected_components(close, directed=False)[0])


# --------------------------------------------------------------------------- training
def train_synthetic(settings: SyntheticSettings, loss: str, oar: bool) -> SyntheticRun:
    """Train one §3 network with ``loss`` (a registry name, constants from ``settings.losses``), with
    the OAR term (§4, Eq. 2) if ``oar``, and measure the unit embeddings of every point (BatchNorm in
    eval mode). Deterministic on the CPU (every draw from its own seed-derived generator; the caller's
    global RNG untouched). A non-finite loss stops the run (``diverged``; the measures None/NaN)."""
    s = settings
    if loss not in s.losses:
        raise ValueError(f"loss {loss!r} is not in settings.losses ({', '.join(s.losses)})")
    x, labels = make_clusters(s.points_per_cluster, s.point_noise, s.seed, min_radius=s.min_radius)
    with _threads(s.threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(s.seed)
        net = make_network(s.hidden)
        if s.optimizer == "sgd":
            opt = torch.optim.SGD(net.parameters(), lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay)
        else:
            opt = torch.optim.Adam(net.parameters(), lr=s.lr, weight_decay=s.weight_decay)
        steps_per_epoch = len(x) // s.batch_size
        schedule = (
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=s.epochs * steps_per_epoch)
            if s.lr_schedule == "cosine"
            else None
        )
        loss_fn = build_loss(loss, **s.losses[loss])
        stream = torch.Generator().manual_seed(s.seed + 1)  # batches and view noise
        labelled = _labelled_mask(labels, s.label_fraction, torch.Generator().manual_seed(s.seed + 2))
        anchors = orthonormal_anchors(3, 3, generator=torch.Generator().manual_seed(s.seed))
        curve: list[float] = []
        norms: list[float] = []
        diverged = False
        net.train()
        for _ in range(s.epochs):
            order = torch.randperm(len(x), generator=stream)
            for b in range(steps_per_epoch):
                idx = order[b * s.batch_size : (b + 1) * s.batch_size]
                v1, v2 = make_views(x[idx], s.view_noise, stream)
                # One forward pass over both views: BatchNorm sees the 2B batch, as in SimCLR.
                h1, h2 = net(torch.cat([v1, v2])).chunk(2)
                total = loss_fn(h1, h2).loss
                if oar:
                    total = total + s.oar_weight * oar_loss(
                        h1, h2, labels[idx], anchors, labelled_mask=labelled[idx]
                    )
                value = float(total.detach())
                curve.append(value)
                if not math.isfinite(value):
                    diverged = True
                    break
                opt.zero_grad(set_to_none=True)
                total.backward()
                if s.grad_clip is not None:  # the norm before clipping: how often the clip acted
                    norms.append(float(nn.utils.clip_grad_norm_(net.parameters(), s.grad_clip)))
                opt.step()
                if schedule is not None:
                    schedule.step()
            if diverged:
                break
        terms = {} if diverged else loss_terms(loss, s.losses[loss], h1.detach(), h2.detach())
        net.eval()
        with torch.no_grad():
            h = net(x).double()
    diverged = diverged or not bool(torch.isfinite(h).all())
    z = F.normalize(h, dim=1)
    if diverged:
        rank, energy, angles, distinct = None, float("nan"), np.full(3, np.nan), None
    else:
        rank, energy = effective_rank(z), line_energy(z)
        angles = axis_angles(z, labels)
        distinct = distinct_directions(z, labels, s.distinct_angle_deg)
    return SyntheticRun(
        loss=loss,
        oar=oar,
        seed=s.seed,
        x=x.numpy(),
        labels=labels.numpy(),
        z=z.numpy(),
        curve=np.array(curve),
        diverged=diverged,
        effective_rank=rank,
        line_energy=energy,
        axis_angles_deg=angles,
        min_axis_angle_deg=float(np.min(angles)),
        distinct_directions=distinct,
        clipped_share=float(np.mean([n > s.grad_clip for n in norms])) if norms else float("nan"),
        max_grad_norm=float(np.max(norms)) if norms else float("nan"),
        terms=terms,
    )


#: Each loss's terms as the registry loss itself with the other weights set to 0 (so a term is exactly
#: what the loss adds, weight included); Barlow Twins' off-diagonal part is the rest of the loss.
_TERMS = {
    "vicreg": {
        "invariance": {"mu": 0.0, "nu": 0.0},
        "variance": {"lam": 0.0, "nu": 0.0},
        "covariance": {"lam": 0.0, "mu": 0.0},
    },
    "barlow_twins": {"on_diagonal": {"lam": 0.0}},
}


def loss_terms(
    loss: str, constants: Mapping[str, Any], h1: torch.Tensor, h2: torch.Tensor
) -> dict[str, float]:
    """The terms of ``loss`` (registry name, ``constants``) on the batch ``h1``, ``h2``: VICReg's
    invariance, variance and covariance, Barlow Twins' on- and off-diagonal parts, each weighted as in the
    loss (they add up to it); {} for a loss without terms here."""
    if loss not in _TERMS:
        return {}
    with torch.no_grad():
        total = float(build_loss(loss, **constants)(h1, h2).loss)
        out = {
            name: float(build_loss(loss, **{**constants, **zeroed})(h1, h2).loss)
            for name, zeroed in _TERMS[loss].items()
        }
    if loss == "barlow_twins":
        out["off_diagonal"] = total - out["on_diagonal"]
    return out


def _row(run: SyntheticRun) -> dict[str, Any]:
    return {
        "loss": run.loss,
        "oar": run.oar,
        "seed": run.seed,
        "effective_rank": run.effective_rank,
        "line_energy": round(run.line_energy, 6),
        "min_axis_angle_deg": round(run.min_axis_angle_deg, 4),
        "distinct_directions": run.distinct_directions,
        "final_loss": round(run.final_loss, 6),
        "diverged": run.diverged,
        "clipped_share": round(run.clipped_share, 6),
        "max_grad_norm": round(run.max_grad_norm, 4),
        **{f"term_{name}": round(value, 6) for name, value in run.terms.items()},
    }


def study_table(runs: Iterable[SyntheticRun]) -> pd.DataFrame:
    """The Table 2 numbers, one row per run: loss, oar, seed, effective_rank, line_energy,
    min_axis_angle_deg, distinct_directions, final_loss, diverged, clipped_share, max_grad_norm and the
    loss's terms on the last batch (``term_<name>``, empty for a loss without them). No timings, so the
    CSV stays bit-identical from run to run; a diverged run's rank and directions are empty cells."""
    # Imported here: the image evaluation jobs import this module for effective_rank alone, and pandas
    # is most of a second of every such job's start.
    import pandas as pd

    table = pd.DataFrame([_row(run) for run in runs])
    return table.astype({"effective_rank": "Int64", "distinct_directions": "Int64"})


def seed_table(
    settings: SyntheticSettings, seeds: Iterable[int], losses: Iterable[str] | None = None
) -> pd.DataFrame:
    """:func:`study_table` of every loss in ``losses`` (default: all of ``settings.losses``) without
    and with OAR, once per seed in ``seeds`` (everything else as ``settings``): how often a loss
    collapses, since one run at this learning rate is one draw of a chaotic first few steps."""
    names = list(settings.losses) if losses is None else list(losses)
    return study_table(
        train_synthetic(dataclasses.replace(settings, seed=seed), loss, oar)
        for seed in seeds
        for loss in names
        for oar in (False, True)
    )
