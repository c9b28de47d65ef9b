"""Assemble one paper table: its cell grid, the published numbers, ours and the differences.

A table is a frame of cells, one row per (backbone, method, key) with ``key`` a task or a
hyperparameter, in display order, with the display coordinates ``row_group``, ``row``, ``col_group``
and ``col``. Backbones that the config's experiment uses but the paper does not (the demo's toy
backbones) are appended with no published number.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.config import Grid, MethodOn, expanded_methods
from contrastlab.search import SEARCHED, searched_method, searched_methods
from contrastlab.senteval.protocol import AVERAGED, TASKS
from contrastlab.tables.deviations import deviations
from contrastlab.tables.metrics import PRETRAINED, aggregate
from contrastlab.tables.published import (
    TableSpec,
    load_meta,
    load_published,
    paper_backbones,
    sweep_point_names,
)
from contrastlab.tables.search import search_experiments
from contrastlab.tables.verdicts import add_verdicts

BACKBONE_LABELS = {
    "bert-base": "BERT-base",
    "bert-large": "BERT-large",
    "roberta-base": "RoBERTa-base",
    "roberta-large": "RoBERTa-large",
}
TASK_LABELS = {
    "STSBenchmark": "STS-B",
    "SICKRelatedness": "SICK-R",
    "sts_avg": "STS.Avg",
    "tr_avg": "TR.Avg",
    "tr_devacc_avg": "TR.Avg (devacc)",
}
STATUS_OK, STATUS_PARTIAL, STATUS_NOT_RUN = "ok", "partial", "not run"
#: A configured cell with no metrics whose training or evaluation failed (see metrics.collect_failures).
STATUS_FAILED = "failed"
#: A configured cell whose every seed's probe diverged (the FFN of OAR's sweep; no accuracy exists).
STATUS_DIVERGED = "diverged"
#: A cell outside the config's grid (backbone or method not configured) with no metrics file.
STATUS_NOT_CONFIGURED = "not configured"
#: A configured cell with no score whose task (or one its average needs) the config's
#: ``evaluation.tasks`` leaves out (the cpu preset's TR.Avg): rerunning never fills it.
STATUS_NOT_EVALUATED = "not evaluated"


@dataclass
class Table:
    """An assembled table, ready to render (see :mod:`contrastlab.tables.render`)."""

    spec: TableSpec
    meta: dict[str, Any]
    cells: pd.DataFrame
    extra_backbones: list[str]
    n_seeds: int | None
    col_groups_are_backbones: bool
    improvement_decimals: int | None = None
    formats: dict[str, str] = field(default_factory=dict)
    #: Where this config's cells deliberately differ from the authors' setup (tables.deviations).
    deviations: list[dict[str, str]] = field(default_factory=list)
    #: Toy backbone -> the paper backbone it stands in for (``tables.verdict_stand_ins``; the report
    #: labels its columns so, :func:`contrastlab.tables.render.to_markdown`).
    stand_ins: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name


def _label(labels: dict, key: str, default: dict | None = None) -> str:
    return str(labels.get(key, (default or {}).get(key, key)))


def _grid(spec: TableSpec, meta: dict, backbones: list[str]) -> pd.DataFrame:
    layout, labels = meta["layout"], meta.get("labels", {})
    mlab, plab = labels.get("methods", {}), labels.get("params", {})
    blab = {b: _label({}, b, BACKBONE_LABELS) for b in backbones}
    by_backbone_rows = layout["backbone_axis"] == "row_groups"
    task_group = {t: g for g, ts in (layout.get("task_groups") or {}).items() for t in ts}
    rows = []
    if spec.kind == "scores" and layout.get("sweep"):
        # Sweep tables (MACL Table 9): a row per method, a column per sweep point and task ("batch 64 kNN").
        tlab, sweep = labels.get("tasks", {}), layout["sweep"]
        for b, m, v, t in itertools.product(backbones, layout["methods"], sweep["values"], layout["tasks"]):
            column = f"{sweep['title']} {v} {_label(tlab, t)}"
            rows.append((b, f"{m}-{sweep['label']}{v}", t, blab[b], _label(mlab, m), "", column))
    elif spec.kind == "scores":
        tlab = labels.get("tasks", {})
        methods = layout["methods"]
        # a row per method under each backbone's group, or a row per method with a column group per backbone
        pairs = (
            itertools.product(backbones, methods)
            if by_backbone_rows
            else ((b, m) for m, b in itertools.product(methods, backbones))
        )
        for (b, m), t in itertools.product(pairs, layout["tasks"]):
            row_group, group = (blab[b], task_group.get(t, "")) if by_backbone_rows else ("", blab[b])
            rows.append((b, m, t, row_group, _label(mlab, m), group, _label(tlab, t, TASK_LABELS)))
    elif spec.kind == "steps":
        rlab, slab = labels.get("rows", {}), labels.get("steps", {})
        for b, r in itertools.product(backbones, layout["rows"]):
            for step, m in zip(layout["steps"], layout["cells"][r], strict=True):
                rows.append((b, m, layout["task"], blab[b], _label(rlab, r), "", _label(slab, step)))
    elif spec.kind == "hparams":
        params = layout["params"]
        if by_backbone_rows:
            for b, m, p in itertools.product(backbones, layout["methods"], params):
                rows.append((b, m, p, blab[b], _label(mlab, m), "", _label(plab, p)))
        else:
            for m in layout["methods"]:
                for p, b in itertools.product(params[m], backbones):
                    rows.append((b, m, p, _label(mlab, m), _label(plab, p), "", blab[b]))
    else:  # pragma: no cover - guarded by the registry
        raise ValueError(f"unknown table kind {spec.kind!r}")
    return pd.DataFrame(rows, columns=["backbone", "method", "key", "row_group", "row", "col_group", "col"])


def configured(grid: Grid, experiment: str, backbone: str, method: str) -> bool:
    """Whether the config's grid has this cell (``pretrained``: the experiment has Pretrained rows)."""
    exp = grid.experiment(experiment).spec
    if backbone not in (exp.get("backbones") or []):
        return False
    if method == PRETRAINED:
        return exp.get("pretrained_pooling") is not None
    if method.endswith(SEARCHED):
        return backbone in _searched(grid, experiment).get(method.removesuffix(SEARCHED), [])
    methods = exp.get("methods") or {}
    if method not in methods and exp.get("sweep"):
        method = expanded_methods(exp).get(method, (method, {}))[0]  # a sweep point: its method's entry
    entry = methods.get(method)
    return entry is not None and (entry.get("backbones") is None or backbone in entry["backbones"])


def evaluated(grid: Grid, key: str) -> bool:
    """Whether the config's ``evaluation.tasks`` score ``key``: a SentEval task in them, an average whose
    every task is in them, or any other key (a vision task, the dev Spearman)."""
    tasks = grid.options.evaluation.get("tasks") or TASKS
    group = AVERAGED.get(key, [key])
    return all(t in tasks for t in group if t in TASKS)


def best_over_sweep(agg: pd.DataFrame, label: str, values: list) -> pd.DataFrame:
    """Seed means of sweep points ``<method>-<label><value>`` reduced to their best point per (backbone,
    method, key), named ``<method>`` with the winning value in ``best_at`` (OAR Table 3's "highest
    classification accuracy" over Fig. 2's rates). A diverged point never wins and is listed in
    ``diverged_at``; a cell whose every point diverged keeps no mean. Other rows are kept."""
    points = sweep_point_names(agg["method"].unique(), label, values)
    if not points:
        return agg
    keys = ["backbone", "method", "key"]
    swept = agg[agg["method"].isin(points)].copy()
    swept["best_at"] = swept["method"].map(lambda name: points[name][1])
    swept["method"] = swept["method"].map(lambda name: points[name][0])
    if "n_diverged" not in swept:
        swept["n_diverged"] = 0
    diverged_at = (
        swept[swept["n_diverged"] > 0]
        .groupby(keys)["best_at"]
        .agg(lambda v: ", ".join(f"{x:g}" for x in sorted(v, reverse=True)))
        .rename("diverged_at")
    )
    # The best mean first (ties: the first point, as idxmax); a cell without any mean keeps one row.
    ranked = swept.sort_values("ours_mean", ascending=False, na_position="last", kind="stable")
    best = ranked.drop_duplicates(keys, keep="first").copy()
    best.loc[best["ours_mean"].isna(), "best_at"] = math.nan
    most_diverged = swept.groupby(keys)["n_diverged"].max().reset_index()
    best = best.drop(columns="n_diverged").merge(most_diverged, on=keys, how="left")
    best = best.merge(diverged_at.reset_index(), on=keys, how="left")
    best["diverged_at"] = [v if isinstance(v, str) else "" for v in best["diverged_at"]]
    return pd.concat([agg[~agg["method"].isin(points)], best], ignore_index=True)


def _scores(
    table: pd.DataFrame,
    spec: TableSpec,
    meta: dict,
    metrics: pd.DataFrame,
    grid: Grid,
    failures: Collection[tuple[str, str, str]] = (),
) -> pd.DataFrame:
    seeds = grid.experiment(spec.experiment).seeds
    agg = aggregate(metrics, spec.experiment, seeds)
    if best := meta["layout"].get("best_over_sweep"):  # the paper's rates, and the config's (the demo's 0.5)
        ours = (grid.experiment(spec.experiment).spec.get("sweep") or {}).get(best["label"], [])
        agg = best_over_sweep(agg, best["label"], [*best["values"], *ours])
    cells = table.merge(agg, on=["backbone", "method", "key"], how="left")
    cells[["n_seeds", "n_diverged"]] = cells[["n_seeds", "n_diverged"]].fillna(0).astype(int)
    one_run = (cells["method"] == PRETRAINED) | cells["method"].str.endswith(SEARCHED)
    expected = np.where(one_run, 1, len(seeds) if seeds is not None else 0)
    pairs = list(zip(cells["backbone"], cells["method"], strict=True))
    in_grid = np.array([configured(grid, spec.experiment, b, m) for b, m in pairs], dtype=bool)
    failed = np.array([(spec.experiment, b, m) in failures for b, m in pairs], dtype=bool)
    cells["status"] = np.select(
        [
            (cells["n_seeds"] == 0) & in_grid & failed,
            (cells["n_seeds"] == 0) & in_grid & (cells["n_diverged"] > 0),
            (cells["n_seeds"] == 0) & in_grid,
            cells["n_seeds"] == 0,
            cells["n_seeds"] < expected,
        ],
        [STATUS_FAILED, STATUS_DIVERGED, STATUS_NOT_RUN, STATUS_NOT_CONFIGURED, STATUS_PARTIAL],
        STATUS_OK,
    )
    unscored = ~cells["key"].map(lambda key: evaluated(grid, key)).astype(bool)
    cells.loc[(cells["status"] == STATUS_NOT_RUN) & unscored, "status"] = STATUS_NOT_EVALUATED
    cells["expected_seeds"] = expected
    cells["diff"] = cells["ours_mean"] - cells["published"]
    if over := (meta.get("improvement") or {}).get("over"):
        base = agg.rename(columns={"method": "base", "ours_mean": "base_mean"})[
            ["backbone", "base", "key", "base_mean"]
        ]
        cells["base"] = cells["method"].map(over)
        cells = cells.merge(base, on=["backbone", "base", "key"], how="left")
        cells["ours_improvement"] = cells["ours_mean"] - cells["base_mean"]
        cells = cells.drop(columns=["base", "base_mean"])
    return cells


def _searched(grid: Grid, experiment: str) -> dict[str, list[str]]:
    """method -> backbones of the experiment's search, when the searches run with the tables."""
    if experiment not in search_experiments(grid):
        return {}
    return searched_methods(grid, experiment)


def _with_searched_rows(rows: pd.DataFrame, spec: TableSpec, grid: Grid) -> pd.DataFrame:
    """A score table's grid with an "ours, searched" row after each searched method's rows (method
    ``<method>~searched``: the search winner's test scores, beside the same published numbers)."""
    searched = _searched(grid, spec.experiment)
    if spec.kind != "scores" or load_meta(spec.name)["layout"].get("sweep") or not searched:
        return rows
    blocks = []
    keys = list(zip(rows["row_group"], rows["method"], strict=True))
    for (_, method), run in itertools.groupby(range(len(rows)), key=lambda i: keys[i]):
        block = rows.iloc[list(run)]
        blocks.append(block)
        if method in searched:  # every column (a backbone not searched says "not configured")
            blocks.append(
                block.assign(method=searched_method(method), row=block["row"] + " (ours, searched)")
            )
    return pd.concat(blocks, ignore_index=True)


#: Parameters of a hyperparameter table that are training settings; every other is a loss hyperparameter.
TRAINING_PARAMS = ("lr", "batch_size")


def param_value(settings: Mapping[str, Any], explicit_hp: Mapping[str, Any], param: str) -> tuple[Any, bool]:
    """``(value, is_default)`` of ``param`` in resolved ``settings``; value None when unset. A loss
    hyperparameter the config leaves out of ``explicit_hp`` (:meth:`Experiment.explicit_hp`) is the loss's
    catalog default (``is_default`` True)."""
    if param in TRAINING_PARAMS:
        return settings.get(param), False
    hp = settings.get("loss_hp") or {}
    if param in hp:
        return hp[param], param not in explicit_hp
    return None, False


def param_status(value: Any, published: float) -> str:
    """A configured setting against the paper's: "not in paper", "unset", "match" or "differs"."""
    if math.isnan(published):
        return "not in paper"
    if value is None:
        return "unset"
    same = isinstance(value, int | float) and math.isclose(float(value), published, rel_tol=1e-9)
    return "match" if same else "differs"


def _hparams(table: pd.DataFrame, spec: TableSpec, grid: Grid) -> pd.DataFrame:
    values, defaults, statuses = [], [], []
    for rec in table.itertuples():
        # settings only for a configured method itself (not a sweep point, Pretrained or a searched row)
        methods = grid.experiment(spec.experiment).spec.get("methods") or {}
        in_grid = rec.method in methods and configured(grid, spec.experiment, rec.backbone, rec.method)
        settings, value, is_default = None, None, False
        if in_grid:
            settings = grid.settings(MethodOn(spec.experiment, rec.backbone, rec.method))
            explicit = grid.experiment(spec.experiment).explicit_hp(rec.method, rec.backbone)
            value, is_default = param_value(settings, explicit, rec.key)
        values.append(value)
        defaults.append(is_default)
        statuses.append(STATUS_NOT_CONFIGURED if settings is None else param_status(value, rec.published))
    cells = table.copy()
    cells["config"] = pd.Series(values, index=cells.index, dtype=object)
    cells["config_is_default"] = defaults
    cells["status"] = statuses
    return cells


def assemble(
    spec: TableSpec, grid: Grid, metrics: pd.DataFrame, failures: Collection[tuple[str, str, str]] = ()
) -> Table:
    """Build table ``spec`` from the collected ``metrics`` (see :func:`~.metrics.collect_metrics`);
    configured cells in ``failures`` (:func:`~.metrics.collect_failures`) with no metrics say "failed"."""
    meta = load_meta(spec.name)
    layout = meta["layout"]
    in_paper = paper_backbones(spec.experiment)
    extras = [b for b in grid.experiment(spec.experiment).spec.get("backbones") or [] if b not in in_paper]
    rows = _grid(spec, meta, list(layout["backbones"]) + extras)
    pub = load_published(spec.name).rename(
        columns={"value": "published", "improvement": "published_improvement"}
    )
    units = pub[pub["unit"] != ""].groupby(["method", "key"])["unit"].first().rename("unit_of").reset_index()
    rows = rows.merge(pub, on=["backbone", "method", "key"], how="left")
    rows = rows.merge(units, on=["method", "key"], how="left")
    rows["unit"] = rows.pop("unit_of").fillna("")
    rows["mark"] = rows["mark"].fillna("")
    rows = _with_searched_rows(rows, spec, grid)
    rows["in_paper"] = rows["backbone"].isin(layout["backbones"])
    seeds = grid.experiment(spec.experiment).seeds
    if spec.kind == "hparams":
        cells = _hparams(rows, spec, grid)
    else:
        cells = _scores(rows, spec, meta, metrics, grid, failures)
        cells = add_verdicts(cells, spec.name, meta, metrics, grid, spec.experiment, seeds)
    return Table(
        spec=spec,
        meta=meta,
        cells=cells,
        extra_backbones=extras,
        n_seeds=len(seeds) if seeds is not None else None,
        col_groups_are_backbones=layout["backbone_axis"] == "columns" and spec.kind != "hparams",
        improvement_decimals=(meta.get("improvement") or {}).get("decimals"),
        formats=dict(layout.get("formats") or {}),
        deviations=deviations(grid, spec.experiment),
        stand_ins=grid.experiment(spec.experiment).stand_ins,
    )
