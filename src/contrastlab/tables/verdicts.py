"""Did it reproduce? Seed-noise intervals and verdicts for every cell compared with a published number.

Three seeds give a poor per-cell standard deviation, so the noise is pooled over the cells of one
stratum (:func:`cell_stratum`: experiment, backbone, task, training protocol and precision;
:func:`noise_pools`): s_p² = Σ_i (n_i − 1) s_i² / Σ_i (n_i − 1), ν = Σ_i (n_i − 1). Our mean x̄ over n
seeds against the published p, a mean over k runs (:func:`published_runs`), has the half-width::

    h = t_{ν, (1+level)/2} · s_p · sqrt(1/n + 1/k)

and the verdict is **within noise** if |x̄ − p| ≤ h, **above** / **below** beyond it, **undecided** if
ν = 0. A deterministic "Pretrained" cell is compared at the published rounding, h = 0.005. The intervals
are per cell, so each table prints beside its ▲/▼ the number expected by chance (:func:`chance_expected`).

    >>> s, df = pooled_std([[1.0, 2.0, 3.0], [2.0, 2.0, 5.0]])
    >>> round(s, 4), df
    (1.4142, 4)
    >>> h = half_width(s, df, n=3, k=1)
    >>> round(h, 3), cell_verdict(2.0, h, df), cell_verdict(-5.0, h, df), cell_verdict(1.0, h, 0)
    (4.534, 'within noise', 'below', 'undecided')
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.config import Grid, MethodOn
from contrastlab.stats import LEVEL, half_width, pooled_std
from contrastlab.tables.metrics import PRETRAINED
from contrastlab.tables.published import load_published

#: Verdicts of a cell compared with its published number.
WITHIN, ABOVE, BELOW, UNDECIDED = "within noise", "above", "below", "undecided"
NO_PUBLISHED = "no published number"
#: Compact markers for the Markdown and LaTeX tables (the Δ row), in legend order.
MARKERS = {WITHIN: "≈", ABOVE: "▲", BELOW: "▼", UNDECIDED: "?"}
#: Half-width for a deterministic cell: the published number's rounding (two decimals).
ROUNDING = 0.005
POOL_COLUMNS = ["backbone", "key", "stratum", "noise_std", "noise_df", "pool_cells"]


def cell_verdict(diff: float, width: float, df: float) -> str:
    """``within noise`` (|diff| ≤ width, the edge included), ``above``, ``below``, or ``undecided``
    (no noise estimate: df 0); ``no published number`` when diff is NaN."""
    if diff is None or math.isnan(diff):
        return NO_PUBLISHED
    if not df or math.isnan(width):
        return UNDECIDED
    if abs(diff) <= width:
        return WITHIN
    return ABOVE if diff > 0 else BELOW


def seed_noise_verdict(user_scores: Iterable[float], other_scores: Iterable[float]) -> str:
    """Another method's per-seed scores against the user's loss's (the comparison tables of
    :mod:`contrastlab.tables.comparison`): the difference of the means (other − user) against
    t_ν · s_p · sqrt(1/n_other + 1/n_user), s_p pooled over the two groups (ν = n_other + n_user − 2).

    >>> seed_noise_verdict([78.0, 78.0], [75.0, 77.0, 76.0])  # -2 against a half-width of 2.37
    'within noise'
    >>> seed_noise_verdict([78.0], [76.0])  # no seed noise to measure
    'undecided'
    """
    user = [x for x in map(float, user_scores) if not math.isnan(x)]
    other = [x for x in map(float, other_scores) if not math.isnan(x)]
    if not user or not other:
        return UNDECIDED
    std, df = pooled_std([user, other])
    diff = float(np.mean(other) - np.mean(user))
    return cell_verdict(diff, half_width(std, df, len(other), len(user)), df)


def cell_stratum(grid: Grid | None, experiment: str, backbone: str, method: str) -> str:
    """The training protocol and precision of a cell, ``"<protocol>/<precision>"`` (a search point as its
    method): cells of one pool share it. ``""`` without a grid or for a cell the grid cannot resolve (the
    Pretrained rows), which pool together."""
    if grid is None or experiment not in grid.every_experiment:
        return ""
    try:
        settings = grid.settings(MethodOn(experiment, backbone, method.split("~", 1)[0]))
    except KeyError:
        return ""
    return f"{settings.get('protocol') or ''}/{settings.get('precision') or ''}"


def _strata(grid: Grid | None, experiment: str, rows: pd.DataFrame) -> list[str]:
    """:func:`cell_stratum` of each of ``rows`` (a frame with backbone and method columns)."""
    return [
        cell_stratum(grid, experiment, b, m) for b, m in zip(rows["backbone"], rows["method"], strict=True)
    ]


def noise_pools(
    metrics: pd.DataFrame, experiment: str, seeds: list[int] | None, grid: Grid | None = None
) -> pd.DataFrame:
    """Pooled seed noise per (backbone, task, stratum) of ``experiment``: columns backbone, key, stratum
    (:func:`cell_stratum` in ``grid``; ``""`` for every cell without one), noise_std, noise_df,
    pool_cells (cells with ≥ 2 seeds). Every trained method of the experiment (sweep points included) is
    a cell of the pool of its protocol and precision; "Pretrained" rows are not (they have no seed)."""
    trained = metrics[(metrics["experiment"] == experiment) & (metrics["method"] != PRETRAINED)]
    if seeds is not None:
        trained = trained[trained["seed"].isin(seeds)]
    trained = trained.assign(stratum=_strata(grid, experiment, trained))
    # One grouping down to the method: a groupby per pool cost ~3 ms each, seconds per claim verdict.
    by_method = trained.groupby(["backbone", "task", "stratum", "method"])["score"].agg(list)
    rows = []
    for (backbone, task, stratum), members in itertools.groupby(by_method.items(), key=lambda kv: kv[0][:3]):
        groups = [scores for _, scores in members]
        std, df = pooled_std(groups)
        rows.append((backbone, task, stratum, std, df, sum(len(g) >= 2 for g in groups)))
    return pd.DataFrame(rows, columns=POOL_COLUMNS)


def published_runs(meta: Mapping[str, Any], method: str) -> int:
    """How many runs the published number of ``method`` averages (the table sidecar's ``runs``:
    ``default`` and per-``methods`` overrides, each with its source); 1 where the paper does not say."""
    runs = meta.get("runs") or {}
    per_method = runs.get("methods") or {}
    base = method.split("-")[0]
    return int(per_method.get(method, per_method.get(base, runs.get("default", 1))))


def runs_assumed(meta: Mapping[str, Any], method: str) -> bool:
    """Whether ``method``'s k is assumed, not stated by the paper: the sidecar's ``runs.assumed`` names
    the method (or its base, ``macl`` for ``macl-bs64``), or ``default`` for every method without its
    own ``runs.methods`` entry. An assumed k = 1 gives the widest interval, which favours "within noise"
    (it is not the cautious choice for a "did it reproduce?" verdict)."""
    runs = meta.get("runs") or {}
    assumed = set(runs.get("assumed") or [])
    per_method = runs.get("methods") or {}
    base = method.split("-")[0]
    name = method if method in per_method else base if base in per_method else None
    return name in assumed if name is not None else "default" in assumed


def runs_text(meta: Mapping[str, Any]) -> str:
    """The k of a table's published numbers for its legend, each value stated or assumed, then the
    source, e.g. "k = 3 (stated); infonce, arccon: k = 1 (assumed: the paper states none). Source: ..."."""
    runs = meta.get("runs") or {}
    if not runs:
        return ""
    per_method = runs.get("methods") or {}
    default = int(runs.get("default", 1))
    groups: dict[tuple[int, bool], list[str]] = {}
    for method, k in per_method.items():
        groups.setdefault((int(k), runs_assumed(meta, method)), []).append(method)
    default_assumed = "default" in set(runs.get("assumed") or [])
    parts = [f"k = {default} ({'assumed' if default_assumed else 'stated'})"]
    for (k, assumed), methods in groups.items():
        if (k, assumed) != (default, default_assumed):
            parts.append(f"{', '.join(methods)}: k = {k} ({'assumed' if assumed else 'stated'})")
    note = (
        ' Assumed: the paper states no number of runs; k = 1 widens the interval, which favours "within'
        ' noise".'
        if default_assumed or any(assumed for _, assumed in groups)
        else ""
    )
    source = " ".join(str(runs["source"]).split())
    return f"Published runs per number: {'; '.join(parts)}. Source: {source}{note}"


@functools.cache
def _published_index(name: str) -> dict[tuple[str, str, str], float]:
    pub = load_published(name)
    return {
        (b, m, k): v
        for b, m, k, v in zip(pub["backbone"], pub["method"], pub["key"], pub["value"], strict=True)
    }


def add_verdicts(
    cells: pd.DataFrame,
    table_name: str,
    meta: Mapping[str, Any],
    metrics: pd.DataFrame,
    grid: Grid,
    experiment: str,
    seeds: list[int] | None,
) -> pd.DataFrame:
    """``cells`` with the pooled noise (``noise_std``, ``noise_df``), the runs behind the published number
    (``published_runs``), the ``half_width`` and the ``verdict`` added. A toy backbone with a stand-in is
    compared with the stand-in's number (``compared_with`` names it); other cells without a published number
    say so."""
    out = cells.copy()
    pools = noise_pools(metrics, experiment, seeds, grid)
    out["stratum"] = _strata(grid, experiment, out)
    out = out.merge(pools.drop(columns="pool_cells"), on=["backbone", "key", "stratum"], how="left")
    out = out.drop(columns="stratum")
    deterministic = out["method"] == PRETRAINED  # one evaluation, no seed: not in any pool
    out.loc[deterministic, "noise_std"] = math.nan
    out["noise_df"] = out["noise_df"].where(~deterministic, 0).fillna(0).astype(int)
    mapping = grid.experiment(experiment).stand_ins
    index = _published_index(table_name)
    rows = []
    for rec in out.itertuples():
        value, against = rec.published, rec.backbone
        if (value is None or math.isnan(value)) and rec.backbone in mapping:
            against = mapping[rec.backbone]
            # a search's winner ("<method>~searched") is compared with its method's published number
            value = index.get((against, rec.method.removesuffix("~searched"), rec.key), math.nan)
            against += " (stand-in)"
        k = published_runs(meta, rec.method.removesuffix("~searched"))
        ran = rec.n_seeds > 0
        if not ran or value is None or math.isnan(value):
            width, verdict = math.nan, (NO_PUBLISHED if ran else rec.status)
            against = "n/a" if value is None or math.isnan(value) else against
        elif rec.method == PRETRAINED:  # deterministic: no seed noise, the published rounding only
            width = ROUNDING
            verdict = cell_verdict(rec.ours_mean - value, width, math.inf)
        else:
            width = half_width(rec.noise_std, rec.noise_df, rec.n_seeds, k)
            verdict = cell_verdict(rec.ours_mean - value, width, rec.noise_df)
        rows.append((k, width, verdict, against, value))
    added = ["published_runs", "half_width", "verdict", "compared_with", "verdict_published"]
    out[added] = pd.DataFrame(rows, columns=added, index=out.index)
    return out


def verdict_counts(cells: pd.DataFrame) -> dict[str, int]:
    """Compared cells (run, with a published number or stand-in) and how many of each verdict."""
    if "verdict" not in cells:
        return {}
    counts = {kind: int((cells["verdict"] == kind).sum()) for kind in (WITHIN, ABOVE, BELOW, UNDECIDED)}
    return {"compared": sum(counts.values()), **counts}


def chance_expected(cells: pd.DataFrame) -> tuple[int, float]:
    """The cells tested against seed noise and the ▲/▼ expected among them by chance: (m, m · (1 − LEVEL)).

    Tested: a trained cell with a verdict from a seed-noise interval (within noise, above or below); not
    undecided cells (no interval) nor the deterministic Pretrained rows (compared at the published
    rounding, where ▲/▼ means the evaluation differs, not noise). If every tested cell reproduced the
    paper exactly, each falls outside its two-sided interval with chance 1 − LEVEL, so the expected count
    is m (1 − LEVEL) by linearity, whatever the dependence between cells (they share pools, which widens
    the spread of the count but not its mean).

    >>> cells = pd.DataFrame({"method": ["cl", "cl", "au", "pretrained"]})
    >>> cells["verdict"] = [WITHIN, ABOVE, UNDECIDED, BELOW]
    >>> tested, expected = chance_expected(cells)
    >>> tested, round(expected, 6)
    (2, 0.1)
    """
    if "verdict" not in cells:
        return 0, 0.0
    tested = int((cells["verdict"].isin([WITHIN, ABOVE, BELOW]) & (cells["method"] != PRETRAINED)).sum())
    return tested, tested * (1 - LEVEL)


def chance_text(cells: pd.DataFrame) -> str:
    """The tested cells' ▲ and ▼ beside the number expected by chance (:func:`chance_expected`), e.g.
    "3 ▲ / 1 ▼ (≈1.2 expected by chance)"; empty without verdicts."""
    tested, expected = chance_expected(cells)
    if not tested:
        return ""
    trained = cells[cells["method"] != PRETRAINED]["verdict"]
    above, below = int((trained == ABOVE).sum()), int((trained == BELOW).sum())
    return f"{above} {MARKERS[ABOVE]} / {below} {MARKERS[BELOW]} (≈{expected:.1f} expected by chance)"


def noise_note(cells: pd.DataFrame) -> str:
    """One sentence on which noise estimate a table uses (pools, their degrees of freedom)."""
    if "noise_df" not in cells:
        return ""
    run = cells[(cells["n_seeds"] > 0) & (cells["method"] != PRETRAINED)]
    if run.empty:
        return "Seed noise: no cell has run."
    dfs = sorted({int(d) for d in run["noise_df"]})
    text = (
        "Seed noise: pooled std over the methods of this experiment that share the cell's backbone, "
        f"task, training protocol and precision (degrees of freedom {', '.join(map(str, dfs))})"
    )
    if 0 in dfs:
        text += "; ν = 0: no cell of the pool has two seeds, so its verdicts are undecided"
    return text + "."
