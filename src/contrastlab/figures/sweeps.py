"""Figures over a swept hyperparameter of the sentence losses (config ``sweep: {hp.<name>: [...]}``).

- Li et al. 2024, Fig. 6: STS-B dev Spearman of the baseline when one component varies (m of the
  gradient-dissipation indicator, τ of the weight, r of the ratio), one panel each; the dev score is the
  best of the run's evaluations (the checkpoint the trainer keeps, ``--load_best_model_at_end``).
- Nie et al. 2023, Fig. 3a: STS.Avg and TR.Avg of MPT against its margin m and against the distance
  gap d_ij each margin ends at (:func:`~contrastlab.figures.geometry_logs.with_gap`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from contrastlab.figures.style import figure, house_style, legend_or_note, line, save
from contrastlab.figures.training_curves import cell_files, cell_logs
from contrastlab.paths import read_metrics

__all__ = ["best_dev_frame", "plot_sweep_panels", "sweep_metrics_frame"]

#: The columns of :func:`best_dev_frame` and :func:`sweep_metrics_frame`.
_COLUMNS = ["backbone", "method", "seed", "param", "value", "key", "score"]


def best_dev_frame(
    checkpoints_root: str | Path, experiment: str, points: Mapping[str, tuple[str, float]]
) -> pd.DataFrame:
    """Per finished cell of ``experiment`` at one of its sweep ``points`` (method -> (param, value),
    :func:`contrastlab.config.sweep_points`): backbone, method, seed, param, value and the best
    ``dev_spearman`` of its ``train_log.jsonl`` (Li Fig. 6's measure)."""
    rows = []
    for backbone, method, seed, records in cell_logs(checkpoints_root, experiment, "eval"):
        if method not in points:
            continue
        if scores := [r["dev_spearman"] for r in records if r.get("dev_spearman") is not None]:
            rows.append((backbone, method, seed, *points[method], "dev_spearman", max(scores)))
    return pd.DataFrame(rows, columns=_COLUMNS)


def sweep_metrics_frame(
    metrics_root: str | Path,
    experiment: str,
    points: Mapping[str, tuple[str, float]],
    keys: Sequence[str] = ("sts_avg", "tr_avg"),
) -> pd.DataFrame:
    """Per evaluated cell of ``experiment`` at one of its sweep ``points``: the ``keys`` of its
    ``senteval.json`` at its sweep value."""
    rows = []
    for backbone, method, seed, path in cell_files(metrics_root, experiment, "senteval.json"):
        if method not in points:
            continue
        metrics = read_metrics(path)
        rows += [
            (backbone, method, seed, *points[method], key, float(metrics[key]))
            for key in keys
            if metrics.get(key) is not None
        ]
    return pd.DataFrame(rows, columns=_COLUMNS)


def plot_sweep_panels(
    panels: Mapping[str, pd.DataFrame],
    stem: str | Path,
    *,
    ylabel: str,
    key_labels: Mapping[str, str] | None = None,
    log_x: Sequence[str] = (),
) -> list[Path]:
    """One panel per entry of ``panels`` (title -> frame of :func:`best_dev_frame` or
    :func:`sweep_metrics_frame`): the mean score over seeds against the swept value, one line per key
    and backbone; ``log_x`` names the panels drawn on a log axis (Li's τ)."""
    key_labels = dict(key_labels or {})
    means = []
    with house_style():
        fig, axes = figure(1, max(1, len(panels)), width="page", aspect=0.8)
        for ax, (title, frame) in zip(axes[0], panels.items(), strict=False):
            mean = frame.groupby(["backbone", "param", "value", "key"], as_index=False)["score"].mean()
            mean.insert(0, "panel", title)
            means.append(mean)
            for i, ((backbone, key), curve) in enumerate(mean.groupby(["backbone", "key"], sort=False)):
                curve = curve.sort_values("value")
                line(ax, curve, "value", "score", i, f"{key_labels.get(key, key)} ({backbone})", marker="o")
            param = mean["param"].iloc[0] if len(mean) else ""
            ax.set_xlabel({"tau": "τ"}.get(param, param))
            ax.set_title(title)
            if title in log_x:
                ax.set_xscale("log")
            legend_or_note(ax, mean.empty, "no runs yet")
        axes[0, 0].set_ylabel(ylabel)
        data = pd.concat(means, ignore_index=True) if means else pd.DataFrame()
        return save(fig, stem, data)
