"""Collect the per-cell metrics files into one frame and aggregate them over seeds."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pandas as pd

from contrastlab.paths import read_metrics

log = logging.getLogger(__name__)

#: Method key (and experiment folder) of the unmodified backbones' metrics files.
PRETRAINED = "pretrained"
#: Keys of the metrics file besides ``scores`` that hold a score (percent).
AVERAGES = ("sts_avg", "tr_avg", "tr_devacc_avg")
#: Task name of a sentence cell's STS-B dev Spearman (percent): the best of the run's dev evaluations,
#: the checkpoint the trainer kept (``train_summary.json``), which the metrics file copies under
#: ``training`` (evaluation.senteval.TRAINING_KEYS). Li et al. 2024 §3.2 and Fig. 6 measure this, not
#: the STS test sets.
DEV_SPEARMAN = "best_dev_spearman"
#: Task name of a sentence cell's dev-set uniformity rebound (the last dev evaluation's uniformity loss
#: minus its minimum, evaluation.senteval.dev_rebound, copied under ``training``): Nie et al. 2023's
#: overfitting of the decoupled losses (Fig. 1). Not a percent: a loss difference.
DEV_REBOUND = "dev_uniformity_rebound"
COLUMNS = ["experiment", "backbone", "method", "seed", "task", "score"]

_SEED_DIR = re.compile(r"seed(\d+)")


def _rows(path: Path, experiment: str, backbone: str, method: str, seed: int | None) -> list[dict]:
    data = read_metrics(path)
    scores = dict(data.get("scores") or {})
    scores.update({k: data.get(k) for k in AVERAGES})
    scores.update({k: (data.get("training") or {}).get(k) for k in (DEV_SPEARMAN, DEV_REBOUND)})
    key = {"experiment": experiment, "backbone": backbone, "method": method, "seed": seed}
    rows = [{**key, "task": task, "score": float(v)} for task, v in scores.items() if v is not None]
    # A probe that diverged (vision.json's ``diverged``: the FFN of OAR's sweep) has no score: a NaN row,
    # so that the tables and figures can mark it instead of reporting a number or "not run".
    return rows + [{**key, "task": task, "score": math.nan} for task in data.get("diverged") or {}]


def collect_failures(metrics_root: str | Path) -> set[tuple[str, str, str]]:
    """``(experiment, backbone, method)`` of every cell with a seed whose training or evaluation failed
    (a ``failed.json`` beside where its metrics would be, written by the job; removed when it reruns)."""
    root = Path(metrics_root)
    found = set()
    for path in sorted(root.glob("*/*/*/seed*/failed.json")) if root.is_dir() else []:
        if not any((path.parent / name).exists() for name in ("senteval.json", "vision.json")):
            found.add(tuple(p.name for p in path.parents[1:4])[::-1])
    return found


def collect_metrics(metrics_root: str | Path) -> pd.DataFrame:
    """Every score under ``metrics_root`` as a long frame (columns :data:`COLUMNS`), in percent as written.

    Reads ``<experiment>/<backbone>/<method>/seed<seed>/senteval.json`` (``vision.json`` for a vision cell)
    and ``pretrained/<backbone>/senteval.json`` (method ``pretrained``, seed NA); the averages and the
    ``training`` block's :data:`DEV_SPEARMAN` and :data:`DEV_REBOUND` are tasks when not null; a task in a
    vision cell's ``diverged`` scores NaN. A missing root gives an empty frame (nothing has run yet).
    """
    root = Path(metrics_root)
    rows: list[dict] = []
    if root.is_dir():
        cells = [*root.glob("*/*/*/seed*/senteval.json"), *root.glob("*/*/*/seed*/vision.json")]
        for path in sorted(cells):
            seed_dir, method, backbone, experiment = (p.name for p in path.parents[:4])
            m = _SEED_DIR.fullmatch(seed_dir)
            if m is None or experiment == PRETRAINED:
                log.warning("ignoring %s (not <experiment>/<backbone>/<method>/seed<N>/)", path)
                continue
            rows += _rows(path, experiment, backbone, method, int(m[1]))
        for path in sorted(root.glob(f"{PRETRAINED}/*/senteval.json")):
            rows += _rows(path, PRETRAINED, path.parent.name, PRETRAINED, None)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["seed"] = frame["seed"].astype("Int64")
    frame["score"] = frame["score"].astype(float)
    return frame


def aggregate(metrics: pd.DataFrame, experiment: str, seeds: list[int] | None) -> pd.DataFrame:
    """Mean, sample std (ddof 1; NaN for one seed), the seeds with a score (``n_seeds``) and with a
    diverged probe (``n_diverged``) per (backbone, method, task): trained cells of ``experiment`` at
    ``seeds`` when given (stale runs of other seeds stay out), and the pretrained cells."""
    trained = metrics[(metrics["experiment"] == experiment) & (metrics["method"] != PRETRAINED)]
    if seeds is not None:
        trained = trained[trained["seed"].isin(seeds)]
    pretrained = metrics[metrics["experiment"] == PRETRAINED]
    both = pd.concat([trained, pretrained], ignore_index=True) if len(pretrained) else trained
    grouped = both.groupby(["backbone", "method", "task"])["score"]
    out = grouped.agg(ours_mean="mean", ours_std="std", n_seeds="count", n_rows="size").reset_index()
    out["n_diverged"] = out.pop("n_rows") - out["n_seeds"]
    return out.rename(columns={"task": "key"})
