"""The synthetic study of the OAR paper (OAR §3, Table 2): does a loss fuse three clusters onto a line?

Three clusters of points in the 3-D unit ball, each a noisy rank-1 subspace (a line through the origin:
a point and its negation belong to the same cluster); two views of each point, one negated, both with
Gaussian noise (§3: "multiplying by -1 and adding random Gaussian noise"); a 3-layer dense network with
BatchNorm and ReLU to 3-D embeddings; trained self-supervised with each loss, without and with the OAR
term on 10% of the labels (§4, :func:`~contrastlab.losses.oar.oar_loss`). Two numbers measure the
collapse of the normalised embeddings: the effective rank at 95% energy (1 = one line) and the smallest
angle between the clusters' principal axes (sign-invariant; 0 degrees = the clusters share one line,
90 = orthogonal). CPU-sized: the whole study (4 losses x +- OAR) runs in under a minute.

[0] "Stable Contrastive Learning with Orthonormal Anchors Regression" (OAR), 2024, §3 and Table 2.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from contrastlab.evaluation.vision import effective_rank
from contrastlab.losses import build_loss
from contrastlab.losses.oar import oar_loss, orthonormal_anchors

__all__ = [
    "CLUSTER_DIRECTIONS",
    "SyntheticSettings",
    "axis_angles",
    "make_clusters",
    "make_views",
    "run_synthetic_study",
    "train_synthetic",
]

#: The three clusters' lines: unit vectors 60-90 degrees apart (fixed, so every seed sees the same
#: geometry; the seed draws the points, the noise, the network and the labelled subset).
CLUSTER_DIRECTIONS = torch.tensor(
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64
) / torch.tensor([[1.0], [1.0], [math.sqrt(3.0)]], dtype=torch.float64)


@dataclass(frozen=True)
class SyntheticSettings:
    """Everything that defines the study; the defaults reproduce the paper's finding in ~30 s on 2 CPUs."""

    points_per_cluster: int = 200
    point_noise: float = 0.05  # std of the Gaussian noise around each line (§3: "controlled Gaussian noise")
    view_noise: float = 0.05  # std of the noise added to each view
    hidden: int = 64  # width of the two hidden layers
    steps: int = 400  # full-batch optimiser steps ("until convergence")
    lr: float = 0.05
    label_fraction: float = 0.1  # labels the OAR term uses (§4-5: 10%)
    seed: int = 0
    losses: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {
            "ntxent": {"tau": 0.5},
            "dcl_vision": {"tau": 0.5},
            "vicreg": {"lam": 25.0, "mu": 25.0, "nu": 1.0},
            "barlow_twins": {"lam": 5e-3},
        }
    )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SyntheticSettings:
        """Build from a mapping (the config's ``oar_synthetic`` block); unknown keys raise."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown oar_synthetic setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
            )
        return cls(**values)


def make_clusters(points_per_cluster: int, noise: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points [3n, 3] (float32, inside the unit ball) and labels [3n]: cluster k is s·t·u_k + noise with
    u_k = :data:`CLUSTER_DIRECTIONS` [k], t ~ U(0.2, 1) and a random sign s (a line, not a ray)."""
    g = torch.Generator().manual_seed(seed)
    n = points_per_cluster
    labels = torch.arange(3).repeat_interleave(n)
    t = 0.2 + 0.8 * torch.rand(3 * n, 1, generator=g, dtype=torch.float64)
    sign = torch.randint(0, 2, (3 * n, 1), generator=g).double() * 2 - 1
    x = sign * t * CLUSTER_DIRECTIONS[labels] + noise * torch.randn(
        3 * n, 3, generator=g, dtype=torch.float64
    )
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1.0)  # stay inside the unit ball
    return x.float(), labels


def make_views(
    x: torch.Tensor, noise: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of each point: x + noise and -x + noise (§3: negation plus Gaussian noise)."""
    return (
        x + noise * torch.randn(x.shape, generator=generator),
        -x + noise * torch.randn(x.shape, generator=generator),
    )


def _network(hidden: int) -> nn.Module:
    """§3: a 3-layer dense network with BatchNorm and ReLU, to 3-D embeddings."""
    return nn.Sequential(
        nn.Linear(3, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(),
        nn.Linear(hidden, 3),
    )


def axis_angles(z: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Angles (degrees, 0-90) between the clusters' principal axes, one per pair of clusters.

    Each cluster's axis is the top right singular vector of its *uncentred* unit embeddings (a line
    through the origin fits z and -z alike), and the angle is arccos |cos| (sign-invariant): 0 means
    two clusters lie on one line (the over-fusion of §3), 90 orthogonal lines.
    """
    unit = torch.nn.functional.normalize(z.double(), dim=1)
    axes = [torch.linalg.svd(unit[labels == k], full_matrices=False).Vh[0] for k in labels.unique()]
    angles = [
        math.degrees(math.acos(min(1.0, abs(float(axes[i] @ axes[j])))))
        for i in range(len(axes))
        for j in range(i + 1, len(axes))
    ]
    return np.array(angles)


def train_synthetic(settings: SyntheticSettings, loss: str, *, oar: bool) -> dict[str, Any]:
    """Train one network with ``loss`` (a registry name, hp from ``settings.losses``), +- the OAR term;
    returns the inputs, labels, unit embeddings of every point (eval mode), loss curve and the two
    collapse measures. Deterministic on the CPU for a given seed."""
    s = settings
    x, labels = make_clusters(s.points_per_cluster, s.point_noise, s.seed)
    torch.manual_seed(s.seed)
    net = _network(s.hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=s.lr)
    loss_fn = build_loss(loss, **s.losses[loss])
    views = torch.Generator().manual_seed(s.seed + 1)
    labelled = torch.from_numpy(np.random.default_rng([s.seed, 0x0A4]).permutation(len(x)))
    labelled = labelled[: max(3, int(s.label_fraction * len(x)))]
    anchors = orthonormal_anchors(3, 3, generator=torch.Generator().manual_seed(s.seed)).float()
    curve = []
    for _ in range(s.steps):
        v1, v2 = make_views(x, s.view_noise, views)
        h1, h2 = net(torch.cat([v1, v2])).chunk(2)
        total = loss_fn(h1, h2).loss
        if oar:
            total = total + oar_loss(h1[labelled], h2[labelled], labels[labelled], anchors)
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        curve.append(float(total.detach()))
    net.eval()
    with torch.no_grad():
        z = torch.nn.functional.normalize(net(x), dim=1)
    angles = axis_angles(z, labels)
    return {
        "x": x.numpy(),
        "labels": labels.numpy(),
        "z": z.numpy(),
        "curve": curve,
        "effective_rank": effective_rank(z),
        "min_axis_angle_deg": float(angles.min()),
    }


def run_synthetic_study(
    settings: SyntheticSettings | Mapping[str, Any],
    out_dir: str | Path,
    *,
    figure_stem: str | Path | None = None,
    table_path: str | Path | None = None,
) -> pd.DataFrame:
    """Every loss of ``settings.losses`` without and with OAR: the table (loss, oar, effective_rank,
    min_axis_angle_deg, final_loss, seconds) written to ``table_path`` (default ``out_dir/table2.csv``)
    and the figure (:func:`contrastlab.figures.oar_synthetic.plot_synthetic`) to ``figure_stem``
    (default ``out_dir/table2``). Returns the table."""
    from contrastlab.figures.oar_synthetic import plot_synthetic

    if not isinstance(settings, SyntheticSettings):
        settings = SyntheticSettings.from_dict(settings)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results, rows = {}, []
    for loss in settings.losses:
        for oar in (False, True):
            started = time.perf_counter()
            result = train_synthetic(settings, loss, oar=oar)
            results[(loss, oar)] = result
            rows.append(
                {
                    "loss": loss,
                    "oar": oar,
                    "effective_rank": result["effective_rank"],
                    "min_axis_angle_deg": round(result["min_axis_angle_deg"], 6),
                    "final_loss": round(result["curve"][-1], 6),
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
            print({k: v for k, v in rows[-1].items() if k != "seconds"}, flush=True)
    table = pd.DataFrame(rows)
    path = Path(table_path) if table_path is not None else out_dir / "table2.csv"
    table.to_csv(path, index=False)
    plot_synthetic(results, figure_stem if figure_stem is not None else out_dir / "table2")
    return table
