"""Nie et al. 2023, Fig. 2a/2b and Fig. 4: gradient norms over the anchor-positive angle θ_ii'
(vertical) and the anchor-negative angle θ_ij' (horizontal), both over [0, π], from the paper's closed
forms (no training; Nie §3.2, §4.1-4.2, App. B, derivations App. C).

The norm of the gradient of one anchor's loss with respect to the raw anchor embedding h_i, split into
the *alignment* part (Fig. 2: through s_ii' = ĥ_i·ĥ'_i; Eqs. 7, 8, 9, 11, 39) and the *uniformity* part
(Fig. 4: through one anchor-negative cosine s_ij', the hardest for the hinge losses; App. B, Eqs. 16-19,
40). Every norm is for ||h_i|| = 1 (the normalisation's Jacobian gives sin θ / ||h_i||; the figures drop
1/||h_i||), with all K negatives (for L_uniform, Eq. 17, all N(N-1) cross-view pairs) at θ_ij'.

Hyperparameters: Nie Table 2's BERT-base column, :data:`contrastlab.losses.catalog.DEFAULTS`.

Where the printed equations have typos the derivation (App. C) and :mod:`contrastlab.losses.nie2023`
win; the tests check every form against autograd of those losses:

- Eq. 7's denominator's first term is the positive's (Eq. 16).
- Eq. 11 (DCL+ alignment) is DCL's sin θ_ii'/τ, gated (Eq. 9, App. C.4), not sin θ_ij'/τ.
- Eqs. 20-22, labelled "pos", are uniformity norms (Eq. 40: sin, cos(·/2), 1 of the hardest negative's
  angle), gated by the hinges' active sets cos θ_ii' - cos θ_ij' < m (MPT), 2 sin(θ_ij'/2) -
  2 sin(θ_ii'/2) < m (MET) and θ_ij' - θ_ii' < m (MAT; m in units of π), not Eq. 20's
  s_ii' + max s_ij' < m or Eq. 40's MET "≥ m".
- Eq. 17's exp(2t cos θ) is exp(-t ||ĥ_i - ĥ'_j||²) up to e^{2t}, which cancels (Eq. 31).

Negative counts (§3.2): Fig. 2a's four leftmost InfoNCE panels take App. A.3's batch sizes (64, 128,
256, 512; the text does not list them), the rest 64 (N = 65 for L_uniform); Fig. 4 repeats the layout.

[0] Z. Nie, R. Zhang, Y. Mao. "On the Inadequacy of Optimizing Alignment and Uniformity in
    Contrastive Learning of Sentence Representations." ICLR 2023.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from contrastlab.figures import registry
from contrastlab.figures import training_curves as tc
from contrastlab.figures.geometry_logs import plot_step_panels, swept_value, with_gap
from contrastlab.figures.style import figure, heatmap, house_style, pi_ticks, save
from contrastlab.figures.sweeps import plot_sweep_panels, sweep_metrics_frame
from contrastlab.losses.catalog import DEFAULTS
from contrastlab.paths import Results

__all__ = [
    "LOSSES",
    "NEGATIVE_COUNTS",
    "FIGURES",
    "Panel",
    "alignment_gradient_norm",
    "uniformity_gradient_norm",
    "gradient_norm_frame",
    "figure_frame",
    "plot_gradient_norms",
]

#: The losses of Nie Table 1, by the project's registry names ("align_uniform" is L_align for the
#: alignment part and L_uniform for the uniformity part, Eqs. 8 and 17).
LOSSES: tuple[str, ...] = ("infonce", "align_uniform", "dcl", "dcl_plus", "mpt", "met", "mat")
#: InfoNCE's negative counts in Fig. 2a / Fig. 4 (see the module docstring); the other panels use 64.
NEGATIVE_COUNTS: tuple[int, ...] = (64, 128, 256, 512)
PANEL_NEGATIVES = 64
#: Grid points per axis: 91 gives 2° steps over [0, π].
POINTS = 91

_LABELS = {
    "infonce": "InfoNCE",
    "align_uniform": "A&U",
    "dcl": "DCL",
    "dcl_plus": "DCL+",
    "mpt": "MPT",
    "met": "MET",
    "mat": "MAT",
}
_AU_LABELS = {"alignment": r"$\mathcal{L}_{align}$", "uniformity": r"$\mathcal{L}_{uniform}$"}
#: The paper's symbol of each plotted norm (mathtext).
_SYMBOLS = {
    ("infonce", "alignment"): r"$\Vert\nabla_{cl}^{pos}\Vert$",
    ("align_uniform", "alignment"): r"$\Vert\nabla\mathcal{L}_{align}\Vert$",
    ("dcl", "alignment"): r"$\Vert\nabla_{dcl}^{pos}\Vert$",
    ("dcl_plus", "alignment"): r"$\Vert\nabla_{dcl^+}^{pos}\Vert$",
    ("mpt", "alignment"): r"$\Vert\nabla_{mpt}^{pos}\Vert$",
    ("met", "alignment"): r"$\Vert\nabla_{met}^{pos}\Vert$",
    ("mat", "alignment"): r"$\Vert\nabla_{mat}^{pos}\Vert$",
    ("infonce", "uniformity"): r"$\Vert\nabla_{cl}^{neg_j}\Vert$",
    ("align_uniform", "uniformity"): r"$\Vert\nabla\mathcal{L}_{uniform}^{j}\Vert$",
    ("dcl", "uniformity"): r"$\Vert\nabla_{dcl}^{neg_j}\Vert$",
    ("dcl_plus", "uniformity"): r"$\Vert\nabla_{dcl^+}^{neg_j}\Vert$",
    ("mpt", "uniformity"): r"$\Vert\nabla_{mpt}^{neg}\Vert$",
    ("met", "uniformity"): r"$\Vert\nabla_{met}^{neg}\Vert$",
    ("mat", "uniformity"): r"$\Vert\nabla_{mat}^{neg}\Vert$",
}


@dataclass(frozen=True)
class Panel:
    """One heatmap: the ``part`` ("alignment" | "uniformity") of ``loss``'s gradient norm with
    ``negatives`` negatives per anchor, in Nie figure ``figure`` ("2a", "2b" or "4")."""

    figure: str
    loss: str
    part: str
    negatives: int = PANEL_NEGATIVES


#: The panels of each figure, left to right: Fig. 2a (InfoNCE at 64/128/256/512 negatives, L_align,
#: DCL), Fig. 2b (DCL+, MPT, MET, MAT), Fig. 4 (the uniformity part of all of them).
FIGURES: dict[str, tuple[Panel, ...]] = {
    "2a": (
        *(Panel("2a", "infonce", "alignment", k) for k in NEGATIVE_COUNTS),
        Panel("2a", "align_uniform", "alignment"),
        Panel("2a", "dcl", "alignment"),
    ),
    "2b": tuple(Panel("2b", loss, "alignment") for loss in ("dcl_plus", "mpt", "met", "mat")),
    "4": (
        *(Panel("4", "infonce", "uniformity", k) for k in NEGATIVE_COUNTS),
        *(Panel("4", loss, "uniformity") for loss in LOSSES[1:]),
    ),
}


def checked_hp(loss: str, hp: Mapping[str, float], losses: Sequence[str]) -> dict[str, float]:
    """``hp`` over ``loss``'s catalog defaults; ``ValueError`` for a loss not in ``losses`` or a
    hyperparameter it does not have."""
    if loss not in losses:
        raise ValueError(f"unknown loss {loss!r}; valid names: {', '.join(losses)}")
    if unknown := set(hp) - set(DEFAULTS[loss]):
        raise ValueError(f"{loss} has no hyperparameter {sorted(unknown)}; valid: {sorted(DEFAULTS[loss])}")
    return {**DEFAULTS[loss], **hp}


def _hyper(loss: str, hp: Mapping[str, float]) -> dict[str, float]:
    merged = checked_hp(loss, hp, LOSSES)
    if loss == "align_uniform":
        merged.pop("lam")  # Eqs. 8 and 17 are the norms of L_align and L_uniform themselves
    return merged


def _angles(theta_pos, theta_neg, negatives: int):
    if int(negatives) != negatives or negatives < 1:
        raise ValueError(f"negatives must be a positive integer, got {negatives}")
    tp, tn = np.broadcast_arrays(np.asarray(theta_pos, np.float64), np.asarray(theta_neg, np.float64))
    return tp, tn, np.cos(tp), np.cos(tn)


def _negatives_share(cos_pos, cos_neg, tau: float, negatives: int):
    """Σ_{j≠i} softmax_j of InfoNCE over K equal negatives: K e^{cn/τ} / (e^{cp/τ} + K e^{cn/τ}).

    Written as a logistic of (cn - cp)/τ + log K so that τ = 0.05 never overflows."""
    return expit((cos_neg - cos_pos) / tau + math.log(negatives))


def alignment_gradient_norm(loss: str, theta_pos, theta_neg, *, negatives: int = PANEL_NEGATIVES, **hp):
    """‖∂L_i/∂h_i‖ through the anchor-positive cosine only (the alignment part), ||h_i|| = 1.

    Nie Eqs. 7 (InfoNCE), 8 (L_align), 9 (DCL), 11 (DCL+) and 39 (MPT, MET, MAT), with all K =
    ``negatives`` negatives at the angle ``theta_neg`` from the anchor (Fig. 2 caption). Angles in
    radians, broadcast against each other; hyperparameters default to Nie Table 2 (BERT-base):

    =============  =======================================================================
    infonce        (1/τ) sin θ_ii' · K e^{cos θ_ij'/τ} / (e^{cos θ_ii'/τ} + K e^{cos θ_ij'/τ})
    align_uniform  α (2 sin(θ_ii'/2))^{α-2} sin θ_ii' = α (2 sin(θ_ii'/2))^{α-1} cos(θ_ii'/2)
    dcl            sin θ_ii' / τ
    dcl_plus       sin θ_ii' / τ where -cos θ_ii'/τ + log Σ_j e^{cos θ_ij'/τ} > 0, else 0
    mpt            sin θ_ii' where cos θ_ii' - cos θ_ij' < m, else 0
    met            cos(θ_ii'/2) where 2 sin(θ_ij'/2) - 2 sin(θ_ii'/2) < m, else 0
    mat            1 where θ_ij' - θ_ii' < m·π, else 0
    =============  =======================================================================

    >>> round(float(alignment_gradient_norm("dcl", np.pi / 2, 0.0, tau=0.5)), 6)
    2.0
    """
    p = _hyper(loss, hp)
    tp, tn, cp, cn = _angles(theta_pos, theta_neg, negatives)
    if loss == "infonce":
        return np.sin(tp) / p["tau"] * _negatives_share(cp, cn, p["tau"], negatives)
    if loss == "align_uniform":
        # The rewritten form stays finite at θ_ii' = 0 for α >= 1 (the printed one is 0^{α-2}·0 there).
        return p["alpha"] * (2.0 * np.sin(tp / 2.0)) ** (p["alpha"] - 1.0) * np.cos(tp / 2.0)
    if loss in ("dcl", "dcl_plus"):
        norm = np.sin(tp) / p["tau"]
        return norm if loss == "dcl" else np.where(_dcl_active(cp, cn, p["tau"], negatives), norm, 0.0)
    return np.where(_hinge_active(loss, tp, tn, cp, cn, p["m"]), _hinge_norm(loss, tp), 0.0)


def uniformity_gradient_norm(loss: str, theta_pos, theta_neg, *, negatives: int = PANEL_NEGATIVES, **hp):
    """‖∂L_i/∂h_i‖ through one anchor-negative cosine (the uniformity part of one negative), ||h_i|| = 1.

    Nie Eqs. 16 (InfoNCE), 17 (L_uniform), 18 (DCL), 19 (DCL+) and 40 (MPT, MET, MAT: the hardest
    negative, the only one with a gradient), all K = ``negatives`` negatives at ``theta_neg``:

    =============  =======================================================================
    infonce        (1/τ) sin θ_ij' · e^{cos θ_ij'/τ} / (e^{cos θ_ii'/τ} + K e^{cos θ_ij'/τ})
    align_uniform  2t sin θ_ij' / (N(N-1)), N = K + 1: Eq. 17's softmax over the N(N-1) cross-view
                   pairs of the batch, all at θ_ij'
    dcl            sin θ_ij' / (K τ)
    dcl_plus       sin θ_ij' / (K τ) where DCL_i > 0, else 0
    mpt            sin θ_ij' where active (gates as in :func:`alignment_gradient_norm`)
    met            cos(θ_ij'/2) where active
    mat            1 where active
    =============  =======================================================================

    >>> round(float(uniformity_gradient_norm("mpt", np.pi / 3, np.pi / 2)), 6)
    0.0
    """
    p = _hyper(loss, hp)
    tp, tn, cp, cn = _angles(theta_pos, theta_neg, negatives)
    if loss == "infonce":
        return np.sin(tn) / (p["tau"] * negatives) * _negatives_share(cp, cn, p["tau"], negatives)
    if loss == "align_uniform":
        n = negatives + 1
        return 2.0 * p["t"] * np.sin(tn) / (n * (n - 1))
    if loss in ("dcl", "dcl_plus"):
        norm = np.sin(tn) / (p["tau"] * negatives)
        return norm if loss == "dcl" else np.where(_dcl_active(cp, cn, p["tau"], negatives), norm, 0.0)
    return np.where(_hinge_active(loss, tp, tn, cp, cn, p["m"]), _hinge_norm(loss, tn), 0.0)


def _dcl_active(cos_pos, cos_neg, tau: float, negatives: int):
    """DCL_i > 0 with K equal negatives: -cp/τ + log(K e^{cn/τ}) > 0 (the ReLU of Eq. 10 passes)."""
    return (cos_neg - cos_pos) / tau + math.log(negatives) > 0.0


def _hinge_active(loss: str, tp, tn, cp, cn, m: float):
    """Where the hinge of MPT / MET / MAT (Nie Eqs. 13-15) is positive, i.e. has a gradient."""
    if loss == "mpt":
        return cp - cn < m
    if loss == "met":
        return 2.0 * np.sin(tn / 2.0) - 2.0 * np.sin(tp / 2.0) < m
    return tn - tp < m * math.pi  # mat: m in units of π


def _hinge_norm(loss: str, theta):
    """‖∂ρ(ĥ_i, ĥ')/∂h_i‖ for ρ = dot product, Euclidean distance, angle (Nie Eqs. 39-40)."""
    if loss == "mpt":
        return np.sin(theta)
    if loss == "met":
        return np.cos(theta / 2.0)
    return np.ones_like(theta)


def gradient_norm_frame(panels: Sequence[Panel], *, points: int = POINTS) -> pd.DataFrame:
    """The gradient norm of every panel on a ``points`` x ``points`` grid of (θ_ii', θ_ij') in [0, π]².

    Returns a tidy frame, one row per panel and grid point: figure, panel (position, 0-based),
    loss, part, negatives, theta_pos (θ_ii'), theta_neg (θ_ij'), grad_norm (Table 2's hyperparameters).
    """
    if points < 2:
        raise ValueError(f"points must be >= 2, got {points}")
    grid = np.linspace(0.0, math.pi, points)
    tp, tn = np.meshgrid(grid, grid, indexing="ij")
    angles = {"theta_pos": tp.ravel(), "theta_neg": tn.ravel()}
    frames = []
    for index, panel in enumerate(panels):
        if panel.part not in ("alignment", "uniformity"):
            raise ValueError(f"part must be 'alignment' or 'uniformity', got {panel.part!r}")
        fn = alignment_gradient_norm if panel.part == "alignment" else uniformity_gradient_norm
        norm = np.asarray(fn(panel.loss, tp, tn, negatives=panel.negatives), np.float64).ravel()
        keys = {
            "figure": panel.figure,
            "panel": index,
            "loss": panel.loss,
            "part": panel.part,
            "negatives": panel.negatives,
        }
        frames.append(pd.DataFrame({**keys, **angles, "grad_norm": norm}))
    return pd.concat(frames, ignore_index=True)


def figure_frame(name: str, *, points: int = POINTS) -> pd.DataFrame:
    """:func:`gradient_norm_frame` of Nie Fig. ``name`` ("2a", "2b" or "4", panels as :data:`FIGURES`)."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; valid names: {', '.join(FIGURES)}")
    return gradient_norm_frame(FIGURES[name], points=points)


_TICKS = ((0.0, "0"), (math.pi / 2, r"$\pi/2$"), (math.pi, r"$\pi$"))


def plot_gradient_norms(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """The heatmaps of ``frame`` (one per panel, in panel order): θ_ij' horizontal, θ_ii' vertical,
    each with its own colour bar labelled with the paper's symbol (1/‖h_i‖ omitted), in the house style,
    written to ``stem``.png/.pdf/.csv (``frame``)."""
    with house_style():
        panels = frame.drop_duplicates("panel").sort_values("panel")
        count = len(panels)
        ncols = math.ceil(count / math.ceil(count / 5))  # 6 panels: 2 x 3, 4: 1 x 4, 10: 2 x 5
        nrows = math.ceil(count / ncols)
        fig, axes = figure(nrows, ncols, width="page", aspect=0.9 if ncols < 5 else 0.75)
        for ax in axes.flat[count:]:
            ax.set_axis_off()
        for position, (ax, panel) in enumerate(zip(axes.flat, panels.itertuples(), strict=False)):
            rows = frame[frame["panel"] == panel.panel]
            mesh = heatmap(ax, rows, "grad_norm", index="theta_pos", columns="theta_neg")
            bar = fig.colorbar(mesh, ax=ax, fraction=0.08, pad=0.03)
            bar.set_label(_SYMBOLS[(panel.loss, panel.part)])
            bar.ax.tick_params(labelsize=5)
            name = _LABELS[panel.loss] if panel.loss != "align_uniform" else _AU_LABELS[panel.part]
            ax.set_title(f"{name}, K={panel.negatives}", fontsize=7 if ncols < 5 else 6)
            ax.set_xlabel(r"$\theta_{ij'}$")
            if position % ncols == 0:  # one y label per row leaves the panels room
                ax.set_ylabel(r"$\theta_{ii'}$")
            ax.set_aspect("equal")
            ax.grid(False)
            pi_ticks(ax.xaxis, _TICKS)
            pi_ticks(ax.yaxis, _TICKS)
        return save(fig, stem, frame)


# ------------------------------------------------------------------ the figures, as the record names them
# Analytic: Fig. 2a, 2b and 4, closed forms on their own grid (:data:`POINTS`: the config's
# analytic_figures sizes Li's simulations).


@registry.figure("nie2023/nie2023_fig2a")
def fig2a(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Nie Fig. 2a: the alignment part of InfoNCE (64-512 negatives), L_align and DCL."""
    return plot_gradient_norms(figure_frame("2a"), stem)


@registry.figure("nie2023/nie2023_fig2b")
def fig2b(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Nie Fig. 2b: the alignment part of DCL+, MPT, MET and MAT."""
    return plot_gradient_norms(figure_frame("2b"), stem)


@registry.figure("nie2023/nie2023_fig4")
def fig4(stem: str | Path, size: Mapping[str, int]) -> list[Path]:
    """Nie Fig. 4: the uniformity part of every loss."""
    return plot_gradient_norms(figure_frame("4"), stem)


# From the cells: Fig. 1a (their metrics), Fig. 1b-d (their training logs), Fig. 3a (the margin sweep's
# metrics, and the gap its logs end at), Fig. 3b and 3c-e (the geometry records of the logs).


@registry.figure("nie2023/align_uniform")
def fig1a(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Nie Fig. 1a: ℓ_align against ℓ_uniform of every checkpoint, coloured by STS.Avg."""
    frame = tc.alignment_uniformity_frame(results.metrics(), experiments[0])
    return tc.plot_alignment_uniformity(frame, stem)


@registry.figure("nie2023/training_curves")
def fig1bd(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Nie Fig. 1b-d: the training curves of every loss, training side and dev side."""
    return tc.plot_training_curves(tc.curves_frame(results.checkpoint(), experiments[0]), stem)


@registry.figure("nie2023/nie2023_fig3")
def fig3a(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Nie Fig. 3a: STS.Avg and TR.Avg of MPT against its margin m and against the gap d_ij; TR.Avg of
    the transfer probes' dev accuracy, which Nie's evaluation prints (as for Table 1)."""
    experiment, keys = experiments[0], ("sts_avg", "tr_devacc_avg")
    by_m = sweep_metrics_frame(Path(results.metrics()), experiment, points[experiment], keys)
    panels = {
        "MPT margin m": by_m,
        "distance gap d_ij": with_gap(by_m, Path(results.checkpoint()), experiment),
    }
    labels = {"sts_avg": "STS.Avg", "tr_devacc_avg": "TR.Avg (devacc)"}
    return plot_sweep_panels(panels, stem, ylabel="score", key_labels=labels)


@registry.figure("nie2023/nie2023_fig3b")
def fig3b(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Nie Fig. 3b: the distance gap d_ij across training per loss."""
    frame = tc.geometry_frame(Path(results.checkpoint()), experiments[0])
    return plot_step_panels(frame, stem, {"distance gap d_ij": {"d_gap": ""}})


@registry.figure("nie2023/nie2023_fig3cde")
def fig3cde(results: Results, stem: str | Path, experiments: Sequence[str], points: Mapping) -> list[Path]:
    """Nie Fig. 3c-e: train L_cl, ℓ_align and ℓ_uniform of MPT, one line per margin m."""
    frame = tc.geometry_frame(Path(results.checkpoint()), experiments[0])
    panels = {
        "train L_cl": {"l_cl": ""},
        "train ℓ_align": {"align": ""},
        "train ℓ_uniform": {"uniformity": ""},
    }
    return plot_step_panels(frame, stem, panels, line_label=swept_value(points[experiments[0]]))
