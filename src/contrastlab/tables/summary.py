"""A preset's headline numbers in one small JSON: what ``dvc metrics show`` and ``dvc exp show`` read.

Per experiment with a paper or comparison table, per backbone and method: the mean over the seeds of
each headline score (STS.Avg, TR.Avg test and dev; linear and kNN top-1; FFN top-1 per label fraction),
rounded as the tables print them; a cell that has not run is left out.

>>> import pandas as pd
>>> cell = ["nie2023", "tiny-bert", "cl"]
>>> metrics = pd.DataFrame(
...     [[*cell, 42, "sts_avg", 70.0], [*cell, 43, "sts_avg", 71.0], [*cell, 42, "STS12", 60.0]],
...     columns=["experiment", "backbone", "method", "seed", "task", "score"])
>>> headline_means(metrics, "nie2023", seeds=[42, 43])
{'tiny-bert': {'cl': {'sts_avg': 70.5}}}
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrastlab.config import Grid
from contrastlab.tables import tables_for_config
from contrastlab.tables.assemble import configured
from contrastlab.tables.comparison import SENTENCE_HEADLINES, VISION_HEADLINES, comparison_tables
from contrastlab.tables.metrics import aggregate, collect_metrics
from contrastlab.tables.published import TABLES

if TYPE_CHECKING:  # pandas is imported where the summary is built
    import pandas as pd

__all__ = ["headline_means", "summary", "summary_experiments"]

#: Decimals of the summary's numbers: the tables' (contrastlab.tables.render.fmt_score).
DECIMALS = 2
_FFN_TOP1 = re.compile(r"ffn\d+_top1")


def summary_experiments(grid: Grid) -> list[str]:
    """The selected experiments that a paper table or a comparison table reports, in config order."""
    reported = {TABLES[name].experiment for name in tables_for_config(grid)}
    reported |= {name.removeprefix("compare_") for name in comparison_tables(grid)}
    return [name for name in grid.experiments if name in reported]


def headline_means(
    metrics: pd.DataFrame, experiment: str, *, seeds: Sequence[int] | None
) -> dict[str, dict[str, dict[str, float]]]:
    """``{backbone: {method: {score: mean}}}`` of ``experiment``'s headline scores over ``seeds`` (the
    unmodified backbones as method ``pretrained``); NaN means (diverged probes) are left out."""
    means: dict[str, dict[str, dict[str, float]]] = {}
    for row in aggregate(metrics, experiment, list(seeds) if seeds is not None else None).itertuples():
        headline = (
            row.key in SENTENCE_HEADLINES or row.key in VISION_HEADLINES or _FFN_TOP1.fullmatch(row.key)
        )
        if headline and not math.isnan(row.ours_mean):
            cell = means.setdefault(row.backbone, {}).setdefault(row.method, {})
            cell[row.key] = round(float(row.ours_mean), DECIMALS)
    return means


def summary(config: Mapping[str, Any], metrics_root: str | Path) -> dict[str, Any]:
    """``{experiment: {backbone: {method: {score: mean}}}}`` of every cell under ``metrics_root`` that
    the config's tables report (:func:`summary_experiments`) and that the config still configures (a
    stale cell of a removed method stays out, as in the tables); an experiment with no score is left out."""
    grid = Grid(dict(config))  # a frozen run's summary: its own entry, so its own grid
    metrics = collect_metrics(metrics_root)
    result: dict[str, Any] = {}
    for experiment in summary_experiments(grid):
        means = headline_means(metrics, experiment, seeds=grid.experiment(experiment).seeds)
        kept = {
            backbone: {
                m: scores for m, scores in methods.items() if configured(grid, experiment, backbone, m)
            }
            for backbone, methods in means.items()
        }
        kept = {backbone: methods for backbone, methods in kept.items() if methods}
        if kept:
            result[experiment] = kept
    return result
