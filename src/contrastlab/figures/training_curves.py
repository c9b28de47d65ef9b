"""Figures read from what the sentence cells already write: Nie et al. 2023, Fig. 1.

- Fig. 1a: ℓ_align against ℓ_uniform of every trained checkpoint on the STS-B dev set, coloured by
  STS.Avg, read from the cells' ``senteval.json`` (``alignment``, ``uniformity``, ``sts_avg``: Wang &
  Isola's measures).
- Fig. 1b-d, in part: per loss, the training loss and, at every dev evaluation, ℓ_align, ℓ_uniform
  and the STS-B Spearman, from the trainer's JSONL logs. The paper also plots the train-set ℓ_uniform
  and the dev-set loss, which the trainer does not log yet.

[0] Nie et al. 2023, "On the Inadequacy of Optimizing Alignment and Uniformity in Contrastive Learning
    of Sentence Representations", ICLR, Fig. 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from contrastlab.figures.style import PALETTE, figure, house_style, save

__all__ = [
    "CURVE_SERIES",
    "alignment_uniformity_frame",
    "curves_frame",
    "plot_alignment_uniformity",
    "plot_training_curves",
]

#: Series of the training-curve figure: (log event, field) -> axis label.
CURVE_SERIES = {
    ("train", "loss"): "training loss",
    ("eval", "dev_align"): "dev alignment (ℓ_align)",
    ("eval", "dev_uniformity"): "dev uniformity (ℓ_uniform)",
    ("eval", "dev_spearman"): "dev STS-B Spearman × 100",
}


def _cells(root: Path, experiment: str, name: str):
    """(backbone, method, seed, path) of every ``<root>/<experiment>/<backbone>/<method>/seed<N>/<name>``."""
    for path in sorted((root / experiment).glob(f"*/*/seed*/{name}")):
        seed_dir = path.parent
        yield seed_dir.parent.parent.name, seed_dir.parent.name, int(seed_dir.name.removeprefix("seed")), path


def alignment_uniformity_frame(metrics_root: str | Path, experiment: str) -> pd.DataFrame:
    """One row per evaluated cell of ``experiment``: backbone, method, seed, alignment, uniformity,
    sts_avg (cells whose metrics lack the measures are skipped)."""
    rows = []
    for backbone, method, seed, path in _cells(Path(metrics_root), experiment, "senteval.json"):
        metrics = json.loads(path.read_text(encoding="utf-8"))
        if None in (metrics.get("alignment"), metrics.get("uniformity"), metrics.get("sts_avg")):
            continue
        rows.append(
            {
                "backbone": backbone,
                "method": method,
                "seed": seed,
                "alignment": float(metrics["alignment"]),
                "uniformity": float(metrics["uniformity"]),
                "sts_avg": float(metrics["sts_avg"]),
            }
        )
    columns = ["backbone", "method", "seed", "alignment", "uniformity", "sts_avg"]
    return pd.DataFrame(rows, columns=columns)


def curves_frame(checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """Long frame of the :data:`CURVE_SERIES` of every cell's ``train_log.jsonl`` (the last run's
    records after any resume: a resumed log repeats nothing): backbone, method, seed, step, series,
    value."""
    rows = []
    for backbone, method, seed, path in _cells(Path(checkpoints_root), experiment, "train_log.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            for (event, key), label in CURVE_SERIES.items():
                if record.get("event") == event and record.get(key) is not None:
                    rows.append(
                        {
                            "backbone": backbone,
                            "method": method,
                            "seed": seed,
                            "step": int(record["step"]),
                            "series": label,
                            "value": float(record[key]),
                        }
                    )
    return pd.DataFrame(rows, columns=["backbone", "method", "seed", "step", "series", "value"])


def plot_alignment_uniformity(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Nie Fig. 1 (left): ℓ_uniform (x) against ℓ_align (y) per checkpoint, colour = STS.Avg, one
    marker per backbone, each point labelled with its loss; lower-left is "better" by both measures."""
    markers = "osD^vP*X"
    with house_style():
        fig, axes = figure(1, 1, width="column", aspect=0.85)
        ax = axes[0, 0]
        scatter = None
        for i, (backbone, part) in enumerate(frame.groupby("backbone", sort=True)):
            scatter = ax.scatter(
                part["uniformity"],
                part["alignment"],
                c=part["sts_avg"],
                cmap="viridis",
                vmin=frame["sts_avg"].min(),
                vmax=frame["sts_avg"].max(),
                marker=markers[i % len(markers)],
                edgecolors="black",
                linewidths=0.3,
                label=backbone,
            )
            for rec in part.itertuples():
                ax.annotate(
                    rec.method,
                    (rec.uniformity, rec.alignment),
                    fontsize=5,
                    xytext=(2, 2),
                    textcoords="offset points",
                )
        ax.set_xlabel("ℓ_uniform")
        ax.set_ylabel("ℓ_align")
        if scatter is not None:
            fig.colorbar(scatter, ax=ax, label="STS.Avg")
            ax.legend(loc="best")
        else:
            ax.text(0.5, 0.5, "no evaluated cells yet", ha="center", va="center", transform=ax.transAxes)
        return save(fig, stem, frame)


def plot_training_curves(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """One panel per :data:`CURVE_SERIES` entry against the training step; one line per
    (backbone, loss), the mean over seeds."""
    series = list(CURVE_SERIES.values())
    mean = frame.groupby(["backbone", "method", "series", "step"], as_index=False)["value"].mean()
    runs = list(dict.fromkeys(zip(mean["backbone"], mean["method"], strict=True)))
    colour = {run: PALETTE[i % len(PALETTE)] for i, run in enumerate(runs)}
    with house_style():
        fig, axes = figure(2, 2, width="page", aspect=0.6, sharex=True)
        for ax, label in zip(axes.flat, series, strict=True):
            part = mean[mean["series"] == label]
            for (backbone, method), curve in part.groupby(["backbone", "method"], sort=False):
                ax.plot(
                    curve["step"],
                    curve["value"],
                    marker=".",
                    color=colour[(backbone, method)],
                    label=f"{method} ({backbone})",
                )
            ax.set_ylabel(label)
        for ax in axes[-1]:
            ax.set_xlabel("training step")
        handles, names = axes[0, 0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="outside upper center", ncol=min(4, len(handles)))
        return save(fig, stem, mean)
