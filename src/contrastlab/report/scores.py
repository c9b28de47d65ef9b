"""The run's numbers as data: ``tables/scores.csv``, one row per cell, seed, task and metric, typed, with
the backbone, method, training protocol and precision, whether the backbone is a toy stand-in and the
commit that trained the cell; and the run's identity (:func:`run_identity`) that the report's title
names. The scores are :func:`contrastlab.tables.metrics.collect_metrics`'s frame, the one every table
and claim reads: written, never recomputed.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from pathlib import Path

import pandas as pd

from contrastlab.config import Grid
from contrastlab.config.command_line import CONFIGFILES_VARIABLE
from contrastlab.paths import Results, read_metrics, write_text
from contrastlab.report.inputs import training_records
from contrastlab.tables.metrics import COLUMNS, PRETRAINED
from contrastlab.tables.verdicts import cell_stratum

#: The file's columns, in order: :data:`~contrastlab.tables.metrics.COLUMNS` and what each row was run with.
SCORE_COLUMNS = [
    *COLUMNS,
    "protocol",
    "precision",
    "stand_in",
    "stands_in_for",
    "trained_commit",
    "trained_dirty",
    "evaluated_commit",
]
SCORES_NAME = "scores.csv"


def _commits(results_dir: Path) -> dict[tuple, tuple[str, bool | None]]:
    """(experiment, backbone, method, seed) of each trained cell -> (commit, uncommitted changes) from its
    trainer's last start record (:func:`~.inputs.training_records`, the checkpoint folders' names); a
    search's winner (``method~searched``) has its own metrics, not its own checkpoint, and so no entry."""
    out = {}
    for cell, start in training_records(results_dir):
        *names, seed = cell.split("/")
        meta = start.get("meta") or {}
        if len(names) == 3 and seed.startswith("seed") and seed[4:].isdigit():
            out[(*names, int(seed[4:]))] = (meta.get("git_sha") or "", meta.get("git_dirty"))
    return out


def _evaluated(metrics_root: Path, experiment: str, backbone: str, method: str, seed) -> str:
    """The commit the metrics file of a cell records (the evaluation job's ``meta``), "" when none."""
    if experiment == PRETRAINED:
        path = metrics_root / PRETRAINED / backbone / "senteval.json"
    else:
        folder = metrics_root / experiment / backbone / method / f"seed{seed}"
        path = next((folder / n for n in ("senteval.json", "vision.json") if (folder / n).is_file()), folder)
    try:
        return str((read_metrics(path).get("meta") or {}).get("git_sha") or "")
    except (OSError, ValueError):
        return ""


def scores_frame(metrics: pd.DataFrame, grid: Grid, results_dir: str | os.PathLike) -> pd.DataFrame:
    """``metrics`` with :data:`SCORE_COLUMNS`: each row's protocol and precision in ``grid`` (empty where
    the grid cannot resolve the cell), its stand-in backbone (``stand_in``, ``stands_in_for``), the commit
    its trainer ran (``trained_commit``, with the tree's uncommitted state) and the one its metrics file
    records (``evaluated_commit``); sorted by experiment, backbone, method, seed and task."""
    root = Path(results_dir)
    commits = _commits(root)
    metrics_root = Path(Results(root).metrics())
    frame = metrics.copy()
    cache: dict[tuple, tuple] = {}
    # the unmodified backbones belong to no experiment: a toy one stands in wherever an experiment says so
    anywhere = {
        toy: paper for name in grid.every_experiment for toy, paper in grid.experiment(name).stand_ins.items()
    }
    rows = []  # per row: (protocol, precision, stands in for, trained commit, dirty, evaluated commit)
    for row in frame.itertuples(index=False):
        key = (row.experiment, row.backbone, row.method, None if pd.isna(row.seed) else int(row.seed))
        if key not in cache:
            experiment, backbone, method, seed = key
            stratum = cell_stratum(grid, experiment, backbone, method) if experiment != PRETRAINED else ""
            stands = anywhere if experiment == PRETRAINED else grid.experiment(experiment).stand_ins
            protocol, _, precision = stratum.partition("/")
            commit, was_dirty = commits.get(key, ("", None))
            evaluated = _evaluated(metrics_root, *key)
            cache[key] = (protocol, precision, stands.get(backbone, ""), commit, was_dirty, evaluated)
        rows.append(cache[key])
    added = ["protocol", "precision", "stands_in_for", "trained_commit", "trained_dirty", "evaluated_commit"]
    frame[added] = pd.DataFrame(rows, columns=added, dtype=object).to_numpy()
    frame["stand_in"] = frame["stands_in_for"] != ""
    frame["trained_dirty"] = frame["trained_dirty"].astype("boolean")
    order = ["experiment", "backbone", "method", "seed", "task"]
    return frame[SCORE_COLUMNS].sort_values(order, na_position="first", kind="stable").reset_index(drop=True)


def write_scores(metrics: pd.DataFrame, grid: Grid, results_dir: str | os.PathLike, out_dir: Path) -> Path:
    """Write :func:`scores_frame` to ``out_dir / scores.csv`` (atomically); returns its path."""
    path = Path(out_dir) / SCORES_NAME
    write_text(path, scores_frame(metrics, grid, results_dir).to_csv(index=False, lineterminator="\n"))
    return path


def run_identity(results_dir: str | os.PathLike) -> dict[str, str]:
    """What names the run on the report's first line: ``preset``, ``results`` (its folder), ``commit``
    (most training jobs', "+N others"), ``date`` (of the newest metrics file, UTC) and ``trained``."""
    root = Path(results_dir)
    preset = os.environ.get(CONFIGFILES_VARIABLE) or "a config given in code"
    shas = Counter(sha for sha, _ in _commits(root).values() if sha)
    if shas:
        top, _ = shas.most_common(1)[0]
        others = len(shas) - 1
        commit = top[:12] + (f" (+{others} other commit{'s' if others > 1 else ''})" if others else "")
    else:
        commit = "no training job yet"
    metrics_root = Path(Results(root).metrics())
    files = [*metrics_root.rglob("senteval.json"), *metrics_root.rglob("vision.json")]
    newest = max((p.stat().st_mtime for p in files), default=None)
    date = (
        dt.datetime.fromtimestamp(newest, dt.UTC).date().isoformat()
        if newest is not None
        else "no cell finished yet"
    )
    return dict(preset=preset, results=root.as_posix(), commit=commit, date=date, trained=bool(shas))
