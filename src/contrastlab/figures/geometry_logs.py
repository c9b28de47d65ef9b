"""Figures drawn from the ``geometry`` records the sentence trainer logs with ``analysis_every`` on
(``contrastlab.training.geometry``: a fixed probe of corpus sentences, two dropout views each):

- Li et al. 2024 (experiment ``li2024_conjectures``: the §3.2 baseline and the same with GD ≡ 1, the probe
  held out of training): Fig. 5, the anchor-negative and anchor-positive cosine densities at the end,
  with and without GD; Fig. 7, the hardest negative's share against τ before and after training; Fig.
  8a, the least ratio meeting Lemma 1 before and after (λ values ours); Fig. 8b, the dynamic ratios of
  ArcCon, MET and MAT; Fig. 9, the estimated μ_pos, μ_neg, σ_pos, σ_neg; from Fig. 6's r sweep, Fig. 8c,
  the mean anchor-positive cosine per r.
- Nie et al. 2023: Fig. 3b, the distance gap d_ij per loss; Fig. 3c-e, train L_cl, ℓ_align and
  ℓ_uniform of MPT per margin; Fig. 3a's x axis, the gap each margin ends at (:func:`with_gap`).

The drawing functions register in their papers' modules; this module holds what they share.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from contrastlab.figures.style import LINESTYLES, figure, house_style, legend_or_note, line, save
from contrastlab.figures.training_curves import geometry_frame

__all__ = [
    "BASELINE",
    "plot_cosine_densities",
    "plot_min_ratio",
    "plot_share_against_tau",
    "plot_step_panels",
    "swept_value",
    "with_gap",
]

BASELINE = "baseline"  # the li2024_conjectures method of Li §3.2's baseline
_NO_DATA = "no geometry records yet\n(training.analysis_every off or cells not trained)"


def plot_step_panels(
    frame: pd.DataFrame,
    stem: str | Path,
    panels: Mapping[str, Mapping[str, str]],
    *,
    line_label=lambda backbone, method: f"{method} ({backbone})",
    reference: Mapping[str, float] | None = None,
) -> list[Path]:
    """One panel per entry of ``panels`` (title -> {geometry key: label}), the key's mean over seeds
    against the training step, one line per (backbone, method) and key; ``reference`` draws a dashed
    horizontal line in the named panels (e.g. R = 1)."""
    keys = [key for spec in panels.values() for key in spec]
    part = frame[frame["key"].isin(keys)]
    mean = part.groupby(["backbone", "method", "key", "step"], as_index=False)["value"].mean()
    runs = list(dict.fromkeys(zip(mean["backbone"], mean["method"], strict=True)))
    curves = dict(list(mean.groupby(["key", "backbone", "method"])))
    with house_style():
        fig, axes = figure(1, len(panels), width="page" if len(panels) > 1 else "column", aspect=0.8)
        for ax, (title, spec) in zip(axes[0], panels.items(), strict=True):
            drawn = False
            several = len(spec) > 1  # a colour per key and a dash per run, else a colour per run
            for k, (key, label) in enumerate(spec.items()):
                for i, run in enumerate(runs):
                    curve = curves.get((key, *run))
                    if curve is None:
                        continue
                    name = " — ".join(x for x in (label, line_label(*run) if len(runs) > 1 else "") if x)
                    name = name or line_label(*run)
                    dash = {"linestyle": LINESTYLES[i % len(LINESTYLES)]} if several else {}  # else line's
                    line(ax, curve, "step", "value", k if several else i, name, marker=".", **dash)
                    drawn = True
            if reference and title in reference:
                ax.axhline(reference[title], color="grey", linestyle="--", linewidth=0.8)
            ax.set(title=title, xlabel="training step")
            legend_or_note(ax, not drawn, _NO_DATA, fontsize="small")
        return save(fig, stem, mean)


def plot_cosine_densities(hist: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Li Fig. 5: density of the anchor-negative (left) and anchor-positive (right) cosines of the probe
    at the end of training, one line per method (the baseline, and GD ≡ 1), mean over seeds."""
    mean = hist.groupby(["method", "pair", "cosine"], as_index=False)["density"].mean()
    labels = {BASELINE: "baseline (with GD)", "no_gd": "GD ≡ 1 (without)"}
    with house_style():
        fig, axes = figure(1, 2, width="page", aspect=0.7)
        for ax, pair in zip(axes[0], ("negative", "positive"), strict=True):
            part = mean[mean["pair"] == pair]
            for i, (method, curve) in enumerate(part.groupby("method", sort=True)):
                line(ax, curve, "cosine", "density", i, labels.get(method, method))
            ax.set(title=f"anchor-{pair} pairs", xlabel="cosine similarity", ylabel="density")
            legend_or_note(ax, part.empty, _NO_DATA)
        return save(fig, stem, mean)


def plot_share_against_tau(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Li Fig. 7: the hardest negative's share of the baseline anchor's update against τ, measured on
    the probe before training (the backbone: step 0) and at the last step, mean over seeds."""
    part = frame[(frame["method"] == BASELINE) & frame["key"].str.startswith("share.")].copy()
    part["tau"] = part["key"].str.removeprefix("share.").astype(float)
    steps = part.groupby(["backbone", "seed"])["step"]
    ends = [("before training", steps.transform("min")), ("after training", steps.transform("max"))]
    data = pd.concat([part[part["step"] == step].assign(when=when) for when, step in ends])
    mean = data.groupby(["backbone", "when", "tau"], as_index=False)["value"].mean()
    mean = mean.rename(columns={"value": "share"})
    with house_style():
        fig, axes = figure(1, 1, width="column", aspect=0.8)
        ax = axes[0, 0]
        for i, ((backbone, when), curve) in enumerate(mean.groupby(["backbone", "when"], sort=False)):
            line(ax, curve, "tau", "share", i, f"{when} ({backbone})", marker="o")
        ax.set(xscale="log", xlabel="τ", ylabel="hardest negative's share")
        legend_or_note(ax, mean.empty, _NO_DATA)
        return save(fig, stem, mean)


def plot_min_ratio(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Li Fig. 8a: density of the least ratio r meeting Lemma 1 per λ, before training (left) and after
    training with the baseline (right), mean over seeds; the dashed line is r = 1 (the static ratio of
    InfoNCE and MPT): the mass to its right is what a ratio above 1 gains."""
    part = frame[frame["method"] == BASELINE]
    mean = part.groupby(["when", "lam", "r"], as_index=False)[["density", "share_r1"]].mean()
    with house_style():
        fig, axes = figure(1, 2, width="page", aspect=0.7, sharey=True)
        for ax, when in zip(axes[0], ("before training", "after training"), strict=True):
            curves = mean[mean["when"] == when]
            for i, (lam, curve) in enumerate(curves.groupby("lam")):
                meets = 1000 * curve["share_r1"].iloc[0] // 1 / 10  # rounded down: 99.96% is not all
                line(ax, curve, "r", "density", i, f"λ = {lam:g} (r = 1 meets {meets:g}%)")
            ax.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
            ax.set(title=when, xlabel="least ratio r meeting Lemma 1")
            legend_or_note(ax, curves.empty, _NO_DATA, fontsize="small")
        axes[0, 0].set_ylabel("density")
        return save(fig, stem, mean)


def with_gap(frame: pd.DataFrame, checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """``frame`` (:func:`~contrastlab.figures.sweeps.sweep_metrics_frame`) with the x value replaced by
    each cell's final distance gap d_ij, that of its last geometry record (Nie Fig. 3a's axis); cells
    without geometry records are dropped."""
    cell = ["backbone", "method", "seed"]
    geometry = geometry_frame(checkpoints_root, experiment)
    gaps = geometry[geometry["key"] == "d_gap"].sort_values("step").groupby(cell).last().reset_index()
    merged = frame.drop(columns=["value"]).merge(gaps[[*cell, "value"]], on=cell).assign(param="d_ij")
    return merged[list(frame.columns)]


def swept_value(points: Mapping[str, tuple[str, float]]):
    """A :func:`plot_step_panels` line label naming each line's swept value (Li Fig. 8c: r; Nie Fig. 3c-e:
    m) by its experiment's sweep ``points`` (method -> (param, value),
    :func:`contrastlab.config.sweep_points`)."""

    def label(backbone: str, method: str) -> str:
        param, value = points.get(method, (method, float("nan")))
        return f"{param} = {value:g}"

    return label
