"""Where any loss sits in Li et al.'s gradient paradigm: GD, W concentration and R over (μ_pos, μ_neg).

For each pair of mean angles on a grid, ``batches`` batches of N anchors are drawn with
:func:`contrastlab.analysis.paradigm_autograd.view_batch` (anchor-positive angles ~ N(μ_pos, 0.05²), all
other angles ~ N(μ_neg, 0.10²), Li App. A.1's spreads) and the loss's autograd paradigm view is averaged
over anchors and batches: the GD mass (scaled to the grid's maximum, so 1 is the loss's strongest push;
Li Fig. 2 draws each loss's GD on its own 0-1 scale too), the hardest negative's share of W (Li Fig. 3)
and the ratio R (Li Fig. 4); W and R are blank where GD is below 1% of its largest value (the
gradient has dissipated there). Three panels, one per quantity;
the CSV holds every plotted number and the realised mean angles of the batches.

Differences from Li's simulation: every anchor of a batch is drawn, not one (batch losses such as
MACL's couple the anchors), the batches are small (N = 16 by default) because the autograd view needs
D ≥ 2N, and μ_neg stops at π/2 (beyond it N unit vectors cannot all be that far apart).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from contrastlab.analysis.paradigm_autograd import paradigm_by_autograd, view_batch
from contrastlab.figures.style import figure, heatmap, house_style, save
from contrastlab.losses import build_loss

__all__ = ["paradigm_grid", "plot_paradigm", "write_paradigm_figure"]

MU_POS_RANGE = (math.pi / 20, math.pi / 2)
MU_NEG_RANGE = (math.pi / 20, math.pi / 2)
#: W and R are left blank where GD is below this share of its largest value: the gradient has
#: dissipated there and its direction is noise (Li Fig. 4 greys those pairs with the same threshold).
GD_THRESHOLD = 0.01


def paradigm_grid(
    loss: Callable, *, points: int = 12, batches: int = 4, n: int = 16, seed: int = 0
) -> pd.DataFrame:
    """The averaged autograd paradigm view of ``loss(z1, z2)`` over a points x points grid of
    (μ_pos, μ_neg): columns mu_pos, mu_neg, realised_pos, realised_neg, gd_mass, gd (mass / grid max),
    hardest_share, r (mean over anchors with a non-zero mass; NaN where none has one), active (share of
    anchors whose gradient has not dissipated). Deterministic for a seed."""
    if points < 2 or batches < 1:
        raise ValueError(f"points must be >= 2 and batches >= 1, got {points}, {batches}")
    g = torch.Generator().manual_seed(seed)
    rows = []
    eye = torch.eye(n, dtype=torch.bool)
    for mu_pos in np.linspace(*MU_POS_RANGE, points):
        for mu_neg in np.linspace(*MU_NEG_RANGE, points):
            mass, share, ratio, active, real_pos, real_neg = [], [], [], [], [], []
            for _ in range(batches):
                z1, z2 = view_batch(float(mu_pos), float(mu_neg), n=n, generator=g)
                view = paradigm_by_autograd(loss, z1, z2)
                on = view.mass.abs() > 0
                mass.append(view.mass.mean().item())
                share.append(view.hardest_share[on].mean().item() if on.any() else float("nan"))
                ratio.append(view.r[on].mean().item() if on.any() else float("nan"))
                active.append(on.double().mean().item())
                angles = torch.arccos((z1 @ z2.T).clamp(-1, 1))
                real_pos.append(angles.diagonal().mean().item())
                real_neg.append(angles[~eye].mean().item())
            means = [float(np.mean(values)) for values in (real_pos, real_neg, mass)]
            rows.append(
                (float(mu_pos), float(mu_neg), *means, _nanmean(share), _nanmean(ratio), np.mean(active))
            )
    columns = ["mu_pos", "mu_neg", "realised_pos", "realised_neg", "gd_mass", "hardest_share", "r", "active"]
    frame = pd.DataFrame(rows, columns=columns)
    top = frame["gd_mass"].abs().max()
    frame["gd"] = frame["gd_mass"].abs() / top if top > 0 else 0.0
    return frame


def _nanmean(values: list[float]) -> float:
    """The mean of ``values`` but their NaNs; NaN where all are (without numpy's warning)."""
    return float(np.nanmean(values)) if not np.all(np.isnan(values)) else float("nan")


def plot_paradigm(frame: pd.DataFrame, stem: str | Path, title: str) -> list[Path]:
    """Three heatmaps (GD, hardest negative's share of W, R) over μ_neg (horizontal) x μ_pos, written to
    ``stem``.png/.pdf/.csv."""
    panels = (
        ("gd", "GD (share of the grid's largest push)", (0.0, 1.0)),
        ("hardest_share", "hardest negative's share of W", (0.0, 1.0)),
        ("r", "ratio R (pull / push)", None),
    )
    with house_style():
        fig, axes = figure(1, 3, width="page", aspect=0.75)
        for ax, (column, label, limits) in zip(axes.flat, panels, strict=True):
            shown = frame[column].where(frame["gd"] >= GD_THRESHOLD) if column != "gd" else frame[column]
            finite = shown.to_numpy()[np.isfinite(shown.to_numpy())]
            vmin, vmax = limits or ((finite.min(), finite.max()) if finite.size else (0.0, 1.0))
            if np.isclose(vmin, vmax, rtol=1e-6):  # a static R (1 up to autograd's noise): one colour
                vmin, vmax = vmin - 0.5, vmax + 0.5
            grid = frame.assign(shown=shown)
            mesh = heatmap(ax, grid, "shown", index="mu_pos", columns="mu_neg", vmin=vmin, vmax=vmax)
            ax.set(title=label, xlabel=r"$\mu_{\mathrm{neg}}$ (rad)", ylabel=r"$\mu_{\mathrm{pos}}$ (rad)")
            ax.grid(False)
            fig.colorbar(mesh, ax=ax, fraction=0.05, pad=0.02)
        fig.suptitle(title)
        return save(fig, stem, frame)


def write_paradigm_figure(
    loss_name: str,
    hp: dict,
    stem: str | Path,
    *,
    label: str | None = None,
    points: int = 12,
    batches: int = 4,
) -> list[Path]:
    """The paradigm figure of loss ``loss_name`` (a registry name or a user loss) with ``hp``, titled
    ``label`` (default: the loss's name)."""
    built = build_loss(loss_name, **hp)
    # The paradigm is about unit vectors: every loss, a raw-input one too, gets the unit rows as they are.
    frame = paradigm_grid(built.on_views, points=points, batches=batches)
    hp_text = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in built.hp.items())
    title = f"{label or loss_name} ({hp_text}): Li et al.'s gradient paradigm by autograd"
    return plot_paradigm(frame, stem, title)
