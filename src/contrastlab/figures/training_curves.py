"""Figures read from what the sentence cells already write: Nie et al. 2023, Fig. 1.

- Fig. 1a: ℓ_align against ℓ_uniform of every checkpoint on the STS-B dev set (as the paper), coloured
  by STS.Avg, from the cells' ``senteval.json`` (Wang & Isola's measures).
- Fig. 1b-d: per loss, on the training side the batch loss and, with ``analysis_every`` on, L_cl
  (InfoNCE, τ 0.05), ℓ_align and ℓ_uniform of a fixed probe of training sentences; on the dev side
  ℓ_align, ℓ_uniform, the STS-B Spearman and L_cl of the dev sentences' two dropout views.

:func:`geometry_frame` and :func:`geometry_histograms` read the ``geometry`` records for the other
log-based figures (Li Fig. 5, 7, 8b-c, 9; Nie Fig. 3a-e).

[0] Nie et al. 2023, "On the Inadequacy of Optimizing Alignment and Uniformity in Contrastive Learning
    of Sentence Representations", ICLR, Fig. 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from contrastlab.figures.style import figure, house_style, line, note, save
from contrastlab.paths import read_metrics
from contrastlab.senteval.protocol import ALIGNMENT_SPLIT

__all__ = [
    "CURVE_SERIES",
    "alignment_uniformity_frame",
    "cell_files",
    "cell_logs",
    "curves_frame",
    "geometry_frame",
    "geometry_histograms",
    "lemma1_frame",
    "plot_alignment_uniformity",
    "plot_training_curves",
]

#: Series of the training-curve figure: (log event, field) -> axis label; the first row of panels is the
#: training side, the second the dev side (Nie Fig. 1b-d).
CURVE_SERIES = {
    ("train", "loss"): "training loss (batch)",
    ("geometry", "l_cl"): "train L_cl (probe)",
    ("geometry", "align"): "train ℓ_align (probe)",
    ("geometry", "uniformity"): "train ℓ_uniform (probe)",
    ("eval", "dev_spearman"): "dev STS-B Spearman × 100",
    ("geometry", "dev_l_cl"): "dev L_cl (dropout views)",
    ("eval", "dev_align"): "dev ℓ_align",
    ("eval", "dev_uniformity"): "dev ℓ_uniform",
}


def cell_files(root: str | Path, experiment: str, name: str):
    """(backbone, method, seed, path) of every ``<root>/<experiment>/<backbone>/<method>/seed<N>/<name>``
    of a configured cell: search points and winners (``<method>~...``, :mod:`contrastlab.search`) have a
    figure of their own, and whether theirs had finished when a paper figure ran must not change it."""
    for path in sorted((Path(root) / experiment).glob(f"*/*/seed*/{name}")):
        seed_dir = path.parent
        if "~" in seed_dir.parent.name:
            continue
        yield seed_dir.parent.parent.name, seed_dir.parent.name, int(seed_dir.name.removeprefix("seed")), path


def cell_logs(root: str | Path, experiment: str, event: str, key: str | None = None):
    """(backbone, method, seed, records) of every cell's ``train_log.jsonl`` with records of ``event``
    (with a truthy ``key`` where given): those records, in order."""
    for backbone, method, seed, path in cell_files(Path(root), experiment, "train_log.jsonl"):
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        if kept := [r for r in records if r.get("event") == event and (not key or r.get(key))]:
            yield backbone, method, seed, kept


def alignment_uniformity_frame(metrics_root: str | Path, experiment: str) -> pd.DataFrame:
    """One row per evaluated cell of ``experiment``: backbone, method, seed, alignment, uniformity,
    sts_avg and the STS-B split they were measured on (cells whose metrics lack the measures are skipped;
    a cell evaluated before they moved to dev, without ``alignment_split``, measured them on test)."""
    rows = []
    for backbone, method, seed, path in cell_files(Path(metrics_root), experiment, "senteval.json"):
        metrics = read_metrics(path)
        measures = [metrics.get(k) for k in ("alignment", "uniformity", "sts_avg")]
        if None not in measures:
            rows.append(
                (backbone, method, seed, *map(float, measures), metrics.get("alignment_split", "test"))
            )
    columns = ["backbone", "method", "seed", "alignment", "uniformity", "sts_avg", "split"]
    return pd.DataFrame(rows, columns=columns)


def curves_frame(checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """Long frame of the :data:`CURVE_SERIES` of every cell's ``train_log.jsonl`` (the last run's
    records after any resume: a resumed log repeats nothing): backbone, method, seed, step, series,
    value."""
    rows = []
    for backbone, method, seed, path in cell_files(Path(checkpoints_root), experiment, "train_log.jsonl"):
        for text in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(text)
            rows += [
                (backbone, method, seed, int(record["step"]), label, float(record[key]))
                for (event, key), label in CURVE_SERIES.items()
                if record.get("event") == event and record.get(key) is not None
            ]
    return pd.DataFrame(rows, columns=["backbone", "method", "seed", "step", "series", "value"])


def _flat_geometry(record: dict) -> dict[str, float]:
    """The scalar statistics of a ``geometry`` record, nested ones as ``ratio.met``, ``share.0.05``."""
    flat = {}
    for key, value in record.items():
        if key in ("event", "step", "hist", "lemma1", "probe_sentences", "probe_heldout"):
            continue
        if isinstance(value, dict):
            prefix = "share" if key == "hardest_share" else key
            flat.update({f"{prefix}.{k}": v for k, v in value.items() if v is not None})
        elif value is not None:
            flat[key] = float(value)
    return flat


def geometry_frame(checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """Long frame of every ``geometry`` record (trainer ``analysis_every``) of the cells of
    ``experiment``: backbone, method, seed, step, key, value."""
    rows = []
    for backbone, method, seed, records in cell_logs(checkpoints_root, experiment, "geometry"):
        for record in records:
            cell = (backbone, method, seed, int(record["step"]))
            rows += [(*cell, k, v) for k, v in _flat_geometry(record).items()]
    return pd.DataFrame(rows, columns=["backbone", "method", "seed", "step", "key", "value"])


def geometry_histograms(checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """The cosine histograms of each cell's last ``geometry`` record: backbone, method, seed, step, pair
    (``positive`` / ``negative``), bin centre, density (per unit cosine, so each curve integrates to 1)."""
    rows = []
    for backbone, method, seed, records in cell_logs(checkpoints_root, experiment, "geometry", "hist"):
        record = records[-1]
        for pair, counts in (("positive", record["hist"]["pos"]), ("negative", record["hist"]["neg"])):
            cell = (backbone, method, seed, int(record["step"]), pair)
            rows += [(*cell, centre, density) for centre, density in _densities(counts, -1.0, 1.0)]
    columns = ["backbone", "method", "seed", "step", "pair", "cosine", "density"]
    return pd.DataFrame(rows, columns=columns)


def _densities(counts: list[int], low: float, high: float) -> list[tuple[float, float]]:
    """(bin centre, density per unit) of a histogram's ``counts`` of equal bins over [low, high]."""
    total, width = sum(counts), (high - low) / len(counts)
    return [
        (low + (i + 0.5) * width, count / (total * width) if total else 0.0) for i, count in enumerate(counts)
    ]


def lemma1_frame(checkpoints_root: str | Path, experiment: str) -> pd.DataFrame:
    """Li Fig. 8a's numbers from each cell's first (before training) and last ``geometry`` record: per
    λ the density of the least ratio meeting Lemma 1 (bin centre ``r``, ``density`` per unit r), the
    number of anchors ``n`` and the share ``share_r1`` that r = 1 satisfies."""
    # torch (training.geometry): this figure module needs only matplotlib and pandas otherwise
    from contrastlab.training.geometry import MIN_RATIO_RANGE

    rows = []
    for backbone, method, seed, records in cell_logs(checkpoints_root, experiment, "geometry", "lemma1"):
        for when, record in (("before training", records[0]), ("after training", records[-1])):
            for lam, entry in record["lemma1"].items():
                cell = (backbone, method, seed, when, int(record["step"]), float(lam))
                rows += [
                    (*cell, r, density, entry["n"], entry["share_r1"])
                    for r, density in _densities(entry["hist"], *MIN_RATIO_RANGE)
                ]
    columns = ["backbone", "method", "seed", "when", "step", "lam", "r", "density", "n", "share_r1"]
    return pd.DataFrame(rows, columns=columns)


def plot_alignment_uniformity(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Nie Fig. 1 (left): ℓ_uniform (x) against ℓ_align (y) per checkpoint, colour = STS.Avg, one
    marker per backbone, each point labelled with its loss; lower-left is "better" by both measures. The
    cells measured on another split than :data:`ALIGNMENT_SPLIT` are left out, and named."""
    markers = "osD^vP*X"
    measured_on_dev = frame["split"] == ALIGNMENT_SPLIT
    stale, on_dev = frame[~measured_on_dev], frame[measured_on_dev]
    with house_style():
        fig, axes = figure(1, 1, width="column", aspect=0.85)
        ax = axes[0, 0]
        scatter = None
        for i, (backbone, part) in enumerate(on_dev.groupby("backbone", sort=True)):
            scatter = ax.scatter(
                part["uniformity"],
                part["alignment"],
                c=part["sts_avg"],
                cmap="viridis",
                vmin=on_dev["sts_avg"].min(),
                vmax=on_dev["sts_avg"].max(),
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
        ax.set(xlabel="ℓ_uniform", ylabel="ℓ_align")
        if scatter is not None:
            fig.colorbar(scatter, ax=ax, label="STS.Avg")
            for handle in ax.legend(loc="best").legend_handles:  # the marker names the backbone, not a score
                handle.set_array(None)
                handle.set_facecolor("0.6")
        if len(stale):  # one line in the figure and its job's log
            left_out = (
                f"{len(stale)} cell(s) left out, measured on STS-B test: rerun them with --forcerun evaluate"
            )
            print(
                f"Fig. 1a: {left_out}:",
                ", ".join(f"{r.backbone}/{r.method}/seed{r.seed}" for r in stale.itertuples()),
            )
            ax.set_title(left_out, fontsize=5)
        elif scatter is None:
            note(ax, "no evaluated cells yet")
        return save(fig, stem, frame)


def plot_training_curves(frame: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Nie Fig. 1b-d: the :data:`CURVE_SERIES` against the training step, the training side above and
    the dev side below; one line per (backbone, loss), the mean over seeds. Panels whose series was not
    logged say so, and why where a setting decides: the probe's with ``analysis_every`` off, the dev
    L_cl with a dev split of fewer unique sentences than one ``analysis_batch`` (the demo's fixture)."""
    mean = frame.groupby(["backbone", "method", "series", "step"], as_index=False)["value"].mean()
    runs = list(dict.fromkeys(zip(mean["backbone"], mean["method"], strict=True)))
    probed = CURVE_SERIES[("geometry", "l_cl")] in set(mean["series"])  # the training probe ran
    with house_style():
        fig, axes = figure(2, 4, width="page", aspect=0.8, sharex=True)
        for ax, ((event, _), label) in zip(axes.flat, CURVE_SERIES.items(), strict=True):
            part = mean[mean["series"] == label]
            for (backbone, method), curve in part.groupby(["backbone", "method"], sort=False):
                name = f"{method} ({backbone})"
                line(ax, curve, "step", "value", runs.index((backbone, method)), name, marker=".")
            ax.set_title(label, fontsize="medium")
            if part.empty:  # why, where the settings decide: the probe's, or the dev split's size
                why = "dev split under one\nanalysis_batch" if probed else "analysis_every off"
                note(ax, "not logged" + (f"\n({why})" if event == "geometry" else ""))
        for ax in axes[-1]:
            ax.set_xlabel("training step")
        handles, names = axes[0, 0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="outside upper center", ncol=min(4, len(handles)))
        return save(fig, stem, mean)
