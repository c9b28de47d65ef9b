"""Li, Zhang & Nie 2024, the simulated analyses of §3.1: Fig. 2 / Fig. 10 (the mean gradient-dissipation
term over a μ_pos x μ_neg grid), Fig. 3 (the share of the weight taken by the hardest negative) and
Fig. 4 (the dynamic ratio terms over the same grid).

:func:`gradient_dissipation`, :func:`weight` and :func:`ratio` evaluate Li Table 1's three components of
the unified paradigm (Eq. 4) of InfoNCE, ArcCon, MPT and MET on cosines (the anchor-positive cos θ_ii'
and the K anchor-negative cos θ_ij' on the last axis); the tests check them against
:func:`contrastlab.analysis.paradigm.paradigm_components`.

The simulation (§3.1, App. A.1): θ_ii' ~ N(μ_pos, 0.05²), θ_ij' ~ N(μ_neg, 0.10²); μ_pos in [π/20, π/2]
and μ_neg in [π/20, π], 100 values each, end points included; per grid point 1,000 batches of 1 positive
and 127 negatives, the mean GD over the batches. Fig. 3 fixes μ_pos = π/6 (the text's; the script: 0.5),
sweeps μ_neg and reports the mean share max_j W_ij / Σ_j W_ij for several τ. Hyperparameters are the
authors' ``simulation.py``'s (github.com/BDBC-KG-NLP/UnderstandingCSE; ArcCon τ 0.05, u = 10°, the rest
:data:`~contrastlab.losses.catalog.DEFAULTS`; Fig. 3's τ 0.3 ... 0.005). Choices here:

- Every loss's GD is evaluated on the *same* draws per grid point (the authors draw anew per loss; the
  heatmaps become comparable point by point). Each μ_pos row has its own stream spawned from ``seed``,
  so a run is bit-identical whatever ``chunk`` is.
- Angles enter only through their cosines: a draw outside [0, π] acts as arccos(cos θ). Only ArcCon's
  cos(θ_ii' + u) depends on this; the authors add u to the raw draw.
- Fig. 3: the authors average the share only over batches whose InfoNCE GD is >= 0.01 (unstated in the
  text) and write 1.0 where none passes. Here ``share`` is that filtered mean (NaN where none passes),
  ``kept`` the fraction that passes, ``share_all`` the mean over all.

[0] M. Li, R. Zhang, Z. Nie. "Towards Better Understanding of Contrastive Sentence Representation
    Learning: A Unified Paradigm for Gradient." ACL 2024 (arXiv full version: Fig. 10 in App. B).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from contrastlab.figures import registry
from contrastlab.figures.geometry_logs import (
    BASELINE,
    plot_cosine_densities,
    plot_min_ratio,
    plot_share_against_tau,
    plot_step_panels,
    swept_value,
)
from contrastlab.figures.nie2023 import checked_hp
from contrastlab.figures.style import LINESTYLES, PALETTE, figure, heatmap, house_style, line, pi_ticks, save
from contrastlab.figures.sweeps import best_dev_frame, plot_sweep_panels
from contrastlab.figures.training_curves import geometry_frame, geometry_histograms, lemma1_frame
from contrastlab.losses.catalog import DEFAULTS
from contrastlab.paths import Results

__all__ = [
    "TABLE1_LOSSES",
    "FIG2_LOSSES",
    "FIG10_LOSSES",
    "FIG3_TAUS",
    "gradient_dissipation",
    "weight",
    "ratio",
    "grid",
    "gd_monte_carlo",
    "hardest_negative_share",
    "plot_gd_heatmaps",
    "plot_hardest_negative_share",
    "ratio_grid",
    "plot_ratio_grid",
]

TABLE1_LOSSES: tuple[str, ...] = ("infonce", "arccon", "mpt", "met")
FIG2_LOSSES: tuple[str, ...] = ("arccon", "met")
FIG10_LOSSES: tuple[str, ...] = ("infonce", "mpt")
#: The temperatures of Fig. 3 (the authors' ``simulation.py``).
FIG3_TAUS: tuple[float, ...] = (0.3, 0.1, 0.05, 0.03, 0.01, 0.005)
#: Li §3.1: the ranges of the means and the spreads of the angles, 100 values per range.
MU_POS_RANGE = (math.pi / 20, math.pi / 2)
MU_NEG_RANGE = (math.pi / 20, math.pi)
SIGMA_POS = 0.05
SIGMA_NEG = 0.10
POINTS = 100
BATCHES = 1000
NEGATIVES = 127
FIG3_MU_POS = math.pi / 6

_LABELS = {"infonce": "InfoNCE", "arccon": "ArcCon", "mpt": "MPT", "met": "MET", "mat": "MAT"}


# --------------------------------------------------------------------------- Li Table 1
def _logsumexp(x: np.ndarray) -> np.ndarray:
    """log Σ exp over the last axis (max-shifted: τ = 0.005 puts cosines at 200 in the exponent)."""
    top = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - top).sum(axis=-1)) + top[..., 0]


def _chord(cos: np.ndarray) -> np.ndarray:
    """‖a - b‖ = sqrt(2 - 2 cos θ) of unit vectors (clipped at 0 against rounding)."""
    return np.sqrt(np.maximum(2.0 - 2.0 * cos, 0.0))


def gradient_dissipation(loss: str, cos_pos, cos_neg, **hp) -> np.ndarray:
    """GD of Li Table 1 (first column) for anchor-positive cosines ``cos_pos`` [...] and anchor-negative
    cosines ``cos_neg`` [..., K]; returns [...].

    ======== ==================================================================
    infonce  1 / (1 + e^{cos θ_ii'/τ} / Σ_k e^{cos θ_ik'/τ})
    arccon   1 / (1 + e^{cos(θ_ii' + u)/τ} / Σ_k e^{cos θ_ik'/τ}), θ_ii' = arccos(cos_pos)
    mpt      1[cos θ_ii' - max_k cos θ_ik' < m]
    met      1[min_k sqrt(2 - 2 cos θ_ik') - sqrt(2 - 2 cos θ_ii') < m]
    ======== ==================================================================

    Hyperparameters default to :data:`~contrastlab.losses.catalog.DEFAULTS` (τ 0.05, u = π/18, MPT m
    0.23, MET m 0.45). The fractions are computed as a logistic of log-sums, never exp then divide.

    >>> round(float(gradient_dissipation("infonce", 0.5, np.full(3, 0.5))), 12)
    0.75
    """
    cos_pos, cos_neg = np.asarray(cos_pos, np.float64), np.asarray(cos_neg, np.float64)
    return _gd_shared(loss, cos_pos, cos_neg, checked_hp(loss, hp, TABLE1_LOSSES), {})


def weight(loss: str, cos_pos, cos_neg, **hp) -> np.ndarray:
    """W_ij of Li Table 1 (second column) for every negative j: [..., K] (``cos_pos`` only broadcasts).

    ======== ==================================================================
    infonce  e^{cos θ_ij'/τ} / (τ Σ_k e^{cos θ_ik'/τ})
    arccon   as InfoNCE
    mpt      1 for the hardest negative (argmin_k θ_ik'), 0 for the others
    met      1 / sqrt(2 - 2 cos θ_ij') for the hardest negative, 0 for the others
    ======== ==================================================================

    >>> weight("mpt", 0.9, np.array([0.1, 0.7, 0.3])).tolist()
    [0.0, 1.0, 0.0]
    """
    p = checked_hp(loss, hp, TABLE1_LOSSES)
    cos_neg = np.asarray(cos_neg, np.float64)
    cos_neg = np.broadcast_to(cos_neg, np.broadcast_shapes(np.shape(cos_pos) + (1,), cos_neg.shape))
    if loss in ("infonce", "arccon"):
        logits = cos_neg / p["tau"]
        return np.exp(logits - _logsumexp(logits)[..., None]) / p["tau"]
    # 1 at the hardest negative (largest cosine = smallest angle; the first one on a tie), 0 elsewhere
    hardest = (np.arange(cos_neg.shape[-1]) == cos_neg.argmax(axis=-1)[..., None]).astype(np.float64)
    return hardest if loss == "mpt" else hardest / _chord(cos_neg)


def ratio(loss: str, cos_pos, cos_neg, **hp) -> np.ndarray:
    """R of Li Table 1 (third column) for every negative j: [..., K].

    ======== ==================================================================
    infonce  1
    arccon   sin(θ_ii' + u) / sin θ_ii'
    mpt      1
    met      sqrt((1 - cos θ_ij') / (1 - cos θ_ii'))
    ======== ==================================================================

    >>> round(float(ratio("met", 0.5, np.array([0.0]))[0]), 6)
    1.414214
    """
    p = checked_hp(loss, hp, TABLE1_LOSSES)
    cos_pos, cos_neg = np.asarray(cos_pos, np.float64), np.asarray(cos_neg, np.float64)
    shape = np.broadcast_shapes(cos_pos.shape + (1,), cos_neg.shape)
    if loss in ("infonce", "mpt"):
        return np.ones(shape)
    if loss == "arccon":
        theta = np.arccos(np.clip(cos_pos, -1.0, 1.0))
        return np.broadcast_to((np.sin(theta + p["u"]) / np.sin(theta))[..., None], shape).copy()
    return np.sqrt((1.0 - cos_neg) / (1.0 - cos_pos)[..., None]) * np.ones(shape)


# --------------------------------------------------------------------------- Fig. 2 / Fig. 10
def grid(value_range: tuple[float, float], points: int) -> np.ndarray:
    """``points`` equally spaced values over ``value_range``, end points included (Li §3.1 step (1))."""
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    return np.linspace(*value_range, points)  # one point: the start


def gd_monte_carlo(
    losses: Sequence[str] = TABLE1_LOSSES,
    *,
    points: int | tuple[int, int] = POINTS,
    batches: int = BATCHES,
    negatives: int = NEGATIVES,
    mu_pos_range: tuple[float, float] = MU_POS_RANGE,
    mu_neg_range: tuple[float, float] = MU_NEG_RANGE,
    sigma_pos: float = SIGMA_POS,
    sigma_neg: float = SIGMA_NEG,
    seed: int = 0,
    chunk: int = 4,
) -> pd.DataFrame:
    """Monte-Carlo mean of Li Table 1's GD over (μ_pos, μ_neg) pairs (Li §3.1.1, Fig. 2 and 10), as the
    module docstring describes, on ``points`` values per axis (an int, or (μ_pos, μ_neg) counts). Float64,
    ``chunk`` μ_neg values x batches x negatives at a time (~8 MB per chunk of 4).

    Returns a tidy frame, one row per loss and pair: loss, mu_pos, mu_neg, gap (μ_neg − μ_pos), gd and
    gd_se, its Monte-Carlo standard error (the batches' sample std over √batches; 0 where every batch
    gives the same value). Bit-identical whatever ``chunk``; docs/measured.md has the full scale's time.
    """
    params = [checked_hp(loss, {}, TABLE1_LOSSES) for loss in losses]  # validate before sampling
    n_pos, n_neg = (points, points) if isinstance(points, int) else points
    _check_sampling(batches, negatives, sigma_pos, sigma_neg, chunk)
    mu_pos, mu_neg = grid(mu_pos_range, n_pos), grid(mu_neg_range, n_neg)
    gd = np.empty((len(losses), n_pos, n_neg))
    se = np.empty((len(losses), n_pos, n_neg))
    for row, stream in enumerate(np.random.SeedSequence(seed).spawn(n_pos)):
        rng = np.random.default_rng(stream)
        # The positives of the whole row first, then the negatives chunk after chunk: the draws, and
        # so the result, do not depend on the chunk size.
        cos_pos = np.cos(mu_pos[row] + sigma_pos * rng.standard_normal((n_neg, batches)))
        for start in range(0, n_neg, chunk):
            stop = min(start + chunk, n_neg)
            cos_neg = _draw_cosines(rng, mu_neg[start:stop], sigma_neg, batches, negatives)
            shared: dict = {}  # the losses' common terms, computed once per chunk
            for index, (loss, p) in enumerate(zip(losses, params, strict=True)):
                values = _gd_shared(loss, cos_pos[start:stop], cos_neg, p, shared)
                gd[index, row, start:stop] = values.mean(-1)
                se[index, row, start:stop] = (
                    values.std(-1, ddof=1) / math.sqrt(batches) if batches > 1 else np.nan
                )
    mp, mn = np.meshgrid(mu_pos, mu_neg, indexing="ij")
    columns = {"mu_pos": mp.ravel(), "mu_neg": mn.ravel(), "gap": (mn - mp).ravel()}
    return pd.concat(
        [
            pd.DataFrame({"loss": loss, **columns, "gd": gd[index].ravel(), "gd_se": se[index].ravel()})
            for index, loss in enumerate(losses)
        ],
        ignore_index=True,
    )


def _gd_shared(loss: str, cos_pos: np.ndarray, cos_neg: np.ndarray, p: Mapping[str, float], shared: dict):
    """:func:`gradient_dissipation` of ``loss`` (resolved hyperparameters ``p``) per batch, taking the
    negatives' log-sum-exp at τ and their largest cosine (the nearest in distance too) from ``shared``
    (filled on first use): the losses of one chunk scan the negatives once per τ and once for the max."""
    if loss in ("infonce", "arccon"):
        key = ("lse", p["tau"])
        if key not in shared:
            shared[key] = _logsumexp(cos_neg / p["tau"])
        pos = cos_pos if loss == "infonce" else np.cos(np.arccos(np.clip(cos_pos, -1.0, 1.0)) + p["u"])
        return expit(shared[key] - pos / p["tau"])
    if "max" not in shared:
        shared["max"] = cos_neg.max(axis=-1)
    if loss == "mpt":
        return (cos_pos - shared["max"] < p["m"]).astype(np.float64)
    return (_chord(shared["max"]) - _chord(cos_pos) < p["m"]).astype(np.float64)


def _check_sampling(batches: int, negatives: int, sigma_pos: float, sigma_neg: float, chunk: int = 1) -> None:
    for name, value in (("batches", batches), ("negatives", negatives), ("chunk", chunk)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}")
    for name, value in (("sigma_pos", sigma_pos), ("sigma_neg", sigma_neg)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


def _draw_cosines(rng: np.random.Generator, mu: np.ndarray, sigma: float, batches: int, negatives: int):
    """cos of θ ~ N(mu, σ²), shape [len(mu), batches, negatives], computed in place (one buffer)."""
    buffer = rng.standard_normal((len(mu), batches, negatives))
    buffer *= sigma
    buffer += mu[:, None, None]
    return np.cos(buffer, out=buffer)


_MU_NEG_TICKS = ((math.pi / 20, r"$\pi/20$"), (math.pi / 2, r"$\pi/2$"), (math.pi, r"$\pi$"))
_MU_POS_TICKS = ((math.pi / 20, r"$\pi/20$"), (math.pi / 4, r"$\pi/4$"), (math.pi / 2, r"$\pi/2$"))


def _hp_text(loss: str) -> str:
    p = DEFAULTS[loss]
    if loss == "arccon":
        return rf"$\tau$={p['tau']:g}, u={math.degrees(p['u']):.0f}°"
    return rf"$\tau$={p['tau']:g}" if loss == "infonce" else f"m={p['m']:g}"


def _mu_axes(ax, title: str) -> None:
    ax.set(title=title, xlabel=r"$\mu_{\mathrm{neg}}$", ylabel=r"$\mu_{\mathrm{pos}}$")
    ax.grid(False)
    pi_ticks(ax.xaxis, _MU_NEG_TICKS)
    pi_ticks(ax.yaxis, _MU_POS_TICKS)


def plot_gd_heatmaps(
    frame: pd.DataFrame, stem: str | Path, losses: Sequence[str] | None = None
) -> list[Path]:
    """One heatmap per loss of :func:`gd_monte_carlo`'s frame: μ_neg horizontal, μ_pos vertical, the mean
    GD in colour on a shared 0-1 scale (Li Fig. 2 / Fig. 10), in the house style, written to
    ``stem``.png/.pdf/.csv (the plotted rows)."""
    losses = list(losses or dict.fromkeys(frame["loss"]))
    with house_style():
        fig, axes = figure(1, len(losses), width="page" if len(losses) > 1 else "column", aspect=0.75)
        for ax, loss in zip(axes.flat, losses, strict=True):
            rows = frame[frame["loss"] == loss]
            if rows.empty:
                raise ValueError(f"no rows for loss {loss!r} in the frame")
            mesh = heatmap(ax, rows, "gd", index="mu_pos", columns="mu_neg", vmin=0.0, vmax=1.0)
            _mu_axes(ax, f"{_LABELS.get(loss, loss)} ({_hp_text(loss)})")
        fig.colorbar(mesh, ax=list(axes.flat), label="mean gradient dissipation GD", fraction=0.05, pad=0.02)
        return save(fig, stem, frame[frame["loss"].isin(losses)].reset_index(drop=True))


# --------------------------------------------------------------------------- Fig. 4
#: The margins of Fig. 4's GD masks (the authors' ``simulation.py``: ``r_arccon`` τ 0.05, u 10°, 127
#: negatives, GD threshold 0.01; ``r_met`` m 0.45; ``r_mat`` m 0.15π).
FIG4_MAT_MARGIN = 0.15 * math.pi
FIG4_GD_THRESHOLD = 0.01


def ratio_grid(points: int = POINTS) -> pd.DataFrame:
    """Li Fig. 4: the dynamic ratio R of ArcCon, MET and MAT at θ_ii' = μ_pos, θ_ij' = μ_neg over the
    §3.1 grid (no sampling: the authors evaluate the closed forms at the grid's angles), and whether the
    pair ``occurs`` in training: not when μ_pos > μ_neg (the positive is always the nearer), nor where the
    loss's gradient has dissipated (ArcCon: GD with :data:`NEGATIVES` negatives at μ_neg below 0.01; MET:
    distance gap ≥ m; MAT: angle gap ≥ m).

    ======== ============================================= ==========================
    arccon   sin(θ_ii' + u) / sin θ_ii'                     u = 10°, τ 0.05
    met      sqrt(2 - 2cos θ_ij') / sqrt(2 - 2cos θ_ii')    m 0.45
    mat      sin θ_ij' / sin θ_ii'                          m 0.15π
    ======== ============================================= ==========================
    """
    mu_pos, mu_neg = np.meshgrid(grid(MU_POS_RANGE, points), grid(MU_NEG_RANGE, points), indexing="ij")
    arccon = DEFAULTS["arccon"]
    chord_pos, chord_neg = _chord(np.cos(mu_pos)), _chord(np.cos(mu_neg))
    arccon_gd = expit(
        np.log(NEGATIVES) + np.cos(mu_neg) / arccon["tau"] - np.cos(mu_pos + arccon["u"]) / arccon["tau"]
    )
    values = {
        "arccon": (np.sin(mu_pos + arccon["u"]) / np.sin(mu_pos), arccon_gd < FIG4_GD_THRESHOLD),
        "met": (chord_neg / chord_pos, chord_neg - chord_pos >= DEFAULTS["met"]["m"]),
        "mat": (np.sin(mu_neg) / np.sin(mu_pos), mu_neg - mu_pos >= FIG4_MAT_MARGIN),
    }
    frames = []
    for loss, (r, dissipated) in values.items():
        occurs = ~((mu_pos > mu_neg) | dissipated)
        in_1_2 = (r >= 1) & (r <= 2)  # §3.1.3's "mostly between 1 and 2", of the pair (closed form: exact)
        columns = {"mu_pos": mu_pos, "mu_neg": mu_neg, "ratio": r, "occurs": occurs, "in_1_2": in_1_2}
        frames.append(pd.DataFrame({"loss": loss, **{k: v.ravel() for k, v in columns.items()}}))
    return pd.concat(frames, ignore_index=True)


def plot_ratio_grid(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Li Fig. 4 in the house style: one heatmap per dynamic ratio on the authors' 0-5 scale, the pairs
    that do not occur in training greyed out."""
    losses = list(dict.fromkeys(frame["loss"]))
    with house_style():
        fig, axes = figure(1, len(losses), width="page", aspect=0.8)
        for ax, loss in zip(axes.flat, losses, strict=True):
            rows = frame[frame["loss"] == loss]
            grid = {"index": "mu_pos", "columns": "mu_neg"}
            mesh = heatmap(ax, rows, "ratio", **grid, vmin=0, vmax=5)
            shade = rows.assign(shade=np.where(rows["occurs"], np.nan, 1.0))
            heatmap(ax, shade, "shade", **grid, cmap="Greys", vmin=0, vmax=1.6, alpha=0.6)
            _mu_axes(ax, f"{_LABELS[loss]} ratio R")
        fig.colorbar(mesh, ax=list(axes.flat), label="R (grey: does not occur in training)", fraction=0.05)
        return save(fig, stem, frame)


# --------------------------------------------------------------------------- Fig. 3
def hardest_negative_share(
    taus: Sequence[float] = FIG3_TAUS,
    *,
    points: int = POINTS,
    batches: int = BATCHES,
    negatives: int = NEGATIVES,
    mu_pos: float = FIG3_MU_POS,
    mu_neg_range: tuple[float, float] = MU_NEG_RANGE,
    sigma_pos: float = SIGMA_POS,
    sigma_neg: float = SIGMA_NEG,
    gd_threshold: float | None = 0.01,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean share max_j W_ij / Σ_j W_ij of the exponential weight taken by the hardest negative, per τ in
    ``taus`` and μ_neg on a ``points`` grid at fixed ``mu_pos`` (Li §3.1.2, Fig. 3), the same draws for
    every τ. ``share`` averages over the batches whose InfoNCE GD at that τ is >= ``gd_threshold`` (the
    authors' filter; NaN where none passes; ``None`` keeps all), ``kept`` is the fraction averaged,
    ``share_all`` the mean over all. The share tends to 1 as τ -> 0 and to 1/``negatives`` as τ -> ∞.

    Returns a tidy frame, one row per (τ, μ_neg): tau, mu_pos, mu_neg, share, share_se (its Monte-Carlo
    standard error over the kept batches), share_all, kept.
    """
    _check_sampling(batches, negatives, sigma_pos, sigma_neg)
    taus = [float(t) for t in taus]
    if not taus or min(taus) <= 0:
        raise ValueError(f"taus must be a non-empty list of positive temperatures, got {taus}")
    mu_neg = grid(mu_neg_range, points)
    rows = []
    for index, stream in enumerate(np.random.SeedSequence(seed).spawn(points)):
        rng = np.random.default_rng(stream)
        cos_pos = np.cos(mu_pos + sigma_pos * rng.standard_normal(batches))
        cos_neg = _draw_cosines(rng, mu_neg[index : index + 1], sigma_neg, batches, negatives)[0]
        for tau in taus:
            w = weight("infonce", cos_pos, cos_neg, tau=tau)
            share = w.max(axis=-1) / w.sum(axis=-1)
            keep = np.ones(batches, dtype=bool)
            if gd_threshold is not None:
                keep = gradient_dissipation("infonce", cos_pos, cos_neg, tau=tau) >= gd_threshold
            kept = share[keep]
            mean = kept.mean() if len(kept) else np.nan
            se = kept.std(ddof=1) / math.sqrt(len(kept)) if len(kept) > 1 else np.nan  # NaN under two batches
            rows.append((tau, mu_pos, mu_neg[index], mean, se, share.mean(), keep.mean()))
    columns = ["tau", "mu_pos", "mu_neg", "share", "share_se", "share_all", "kept"]
    return pd.DataFrame(rows, columns=columns).sort_values(["tau", "mu_neg"], ignore_index=True)


#: The μ_neg values (nearest grid points) of the right panel of the share figure.
_SHARE_MARKS = (math.pi / 4, math.pi / 2, 3 * math.pi / 4, math.pi)


def plot_hardest_negative_share(
    frame: pd.DataFrame, stem: str | Path, *, negatives: int = NEGATIVES
) -> list[Path]:
    """Two panels of :func:`hardest_negative_share`'s frame in the house style, written to
    ``stem``.png/.pdf/.csv.

    Left (Li Fig. 3): the share against μ_neg, one colour per τ of :data:`FIG3_TAUS` found in the frame
    (all of the frame's when none is), solid over the batches whose gradient has not dissipated
    (``share``, gaps where none is left), dotted over all batches (``share_all``). Right: the share over
    all batches against τ (log scale) at four μ_neg, with the uniform share 1/``negatives`` dashed.
    """
    with house_style():
        fig, axes = figure(1, 2, width="page", aspect=0.8)
        left, right = axes[0]
        present = frame["tau"].unique()
        taus = sorted([t for t in present if np.isclose(t, FIG3_TAUS).any()] or present, reverse=True)
        for k, tau in enumerate(taus):
            rows = frame[frame["tau"] == tau]
            colour = PALETTE[k % len(PALETTE)]
            line(left, rows, "mu_neg", "share", k, rf"$\tau$={tau:g}", linestyle=LINESTYLES[0])
            left.plot(rows["mu_neg"], rows["share_all"], color=colour, linestyle=LINESTYLES[1], linewidth=0.9)
        left.set(xlabel=r"$\mu_{\mathrm{neg}}$", ylabel="hardest negative's share of W", ylim=(0.0, 1.02))
        pi_ticks(left.xaxis, _MU_NEG_TICKS)
        left.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncols=3,
            title=r"solid: batches with GD $\geq$ 0.01; dotted: all batches",
            title_fontsize=6,
        )
        mu_values = np.sort(frame["mu_neg"].unique())
        marks = sorted({float(mu_values[np.abs(mu_values - target).argmin()]) for target in _SHARE_MARKS})
        for k, mu in enumerate(marks):
            label = rf"$\mu_{{\mathrm{{neg}}}}$ = {mu / math.pi:.2f}$\pi$"
            line(
                right,
                frame[frame["mu_neg"] == mu].sort_values("tau"),
                "tau",
                "share_all",
                k,
                label,
                marker="o",
            )
        right.axhline(1.0 / negatives, color=PALETTE[-1], linestyle=LINESTYLES[2], linewidth=0.8, label="1/K")
        right.set(xscale="log", xlabel=r"temperature $\tau$")
        right.set(ylabel="hardest negative's share of W (all batches)", ylim=(0.0, 1.02))
        right.legend(loc="upper right")
        return save(fig, stem, frame)


# ------------------------------------------------------------------ the figures, as the record names them
# Analytic (the config's analytic_figures: points, batches): Fig. 2, 10, 3 and 4.


@functools.cache
def _gd_frame(points: int, batches: int) -> pd.DataFrame:
    # Fig. 2 and Fig. 10 plot two halves of one simulation, which their one job runs once
    return gd_monte_carlo(TABLE1_LOSSES, points=points, batches=batches)


@registry.figure("li2024/li2024_fig2")
def fig2(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Li Fig. 2: GD of ArcCon and MET over μ_pos × μ_neg."""
    return plot_gd_heatmaps(_gd_frame(size["points"], size["batches"]), stem, FIG2_LOSSES)


@registry.figure("li2024/li2024_fig10")
def fig10(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Li Fig. 10: GD of InfoNCE and MPT, from Fig. 2's simulation."""
    return plot_gd_heatmaps(_gd_frame(size["points"], size["batches"]), stem, FIG10_LOSSES)


@registry.figure("li2024/li2024_fig3")
def fig3(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Li Fig. 3: the hardest negative's share at :data:`FIG3_TAUS` plus a log-spaced sweep 0.001-3 (the
    right panel)."""
    taus = sorted(set(FIG3_TAUS) | {float(t) for t in np.geomspace(1e-3, 3.0, 15)})
    share = hardest_negative_share(taus, points=size["points"], batches=size["batches"])
    return plot_hardest_negative_share(share, stem)


@registry.figure("li2024/li2024_fig4")
def fig4(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Li Fig. 4: the dynamic ratios over μ_pos × μ_neg."""
    return plot_ratio_grid(ratio_grid(size["points"]), stem)


# From the cells' training logs: Fig. 6 (the dev scores of its three sweeps) and the geometry records of
# §3.2's baseline (Fig. 5, 7, 8a, 8b, 9) and of the r sweep (Fig. 8c).

#: Fig. 6's panel of each of its experiments.
FIG6_PANELS = {"li2024_fig6_m": "GD margin m", "li2024_fig6_tau": "weight τ", "li2024_fig6_r": "ratio r"}


@registry.figure("li2024/li2024_fig6")
def fig6(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 6: the best STS-B dev score of each swept value, one panel per configured sweep."""
    root = Path(results.checkpoint())
    panels = {FIG6_PANELS[e]: best_dev_frame(root, e, points[e]) for e in experiments}
    return plot_sweep_panels(panels, stem, ylabel="STS-B dev Spearman × 100", log_x=["weight τ"])


@registry.figure("li2024/li2024_fig5")
def fig5(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 5: the probe's cosine densities at the end of training, with and without GD."""
    return plot_cosine_densities(geometry_histograms(Path(results.checkpoint()), experiments[0]), stem)


@registry.figure("li2024/li2024_fig7")
def fig7(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 7: the hardest negative's share against τ, before and after training."""
    return plot_share_against_tau(geometry_frame(Path(results.checkpoint()), experiments[0]), stem)


@registry.figure("li2024/li2024_fig8a")
def fig8a(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 8a: the least ratio meeting Lemma 1, before and after training."""
    return plot_min_ratio(lemma1_frame(Path(results.checkpoint()), experiments[0]), stem)


@registry.figure("li2024/li2024_fig8b")
def fig8b(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 8b: the dynamic ratios of ArcCon, MET and MAT across training, R = 1 dashed."""
    frame = geometry_frame(Path(results.checkpoint()), experiments[0])
    title = "dynamic ratio R"
    panels = {title: {"ratio.arccon": "ArcCon", "ratio.met": "MET", "ratio.mat": "MAT"}}
    return plot_step_panels(frame[frame["method"] == BASELINE], stem, panels, reference={title: 1.0})


@registry.figure("li2024/li2024_fig8c")
def fig8c(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 8c: the mean anchor-positive cosine across training, one line per r."""
    frame = geometry_frame(Path(results.checkpoint()), experiments[0])
    panels = {"anchor-positive cosine": {"cos_pos": ""}}
    return plot_step_panels(frame, stem, panels, line_label=swept_value(points[experiments[0]]))


@registry.figure("li2024/li2024_fig9")
def fig9(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Li Fig. 9: the estimated μ_pos, μ_neg, σ_pos, σ_neg across training."""
    frame = geometry_frame(Path(results.checkpoint()), experiments[0])
    panels = {
        "means (rad)": {"mu_pos": "μ_pos", "mu_neg": "μ_neg"},
        "spreads (rad)": {"sigma_pos": "σ_pos", "sigma_neg": "σ_neg"},
    }
    return plot_step_panels(frame[frame["method"] == BASELINE], stem, panels)
