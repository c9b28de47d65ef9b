"""The search budget: which points of a config's searches their ``budget_gpu_hours`` pays for, nearest the
configured settings first.

So that a measured calibration never changes a search that has started (points appearing or vanishing
from a half-run grid), the workflow pins what each budget kept when it first runs (:func:`write_pins`);
later runs and ``make plan`` read the pin (:func:`pinned`) while the search's spec, budget and grid are
the same, and price afresh once any of them changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.cost.calibration import Calibration, load_calibration, train_seconds
from contrastlab.cost.flops import cell_work
from contrastlab.cost.measured import grouped
from contrastlab.paths import read_json, write_json


# ------------------------------------------------------------------------------------------- searches
def _distance(grid: cl_config.Grid, point: cl_search.SearchPoint, stage: Mapping[str, Any]) -> int:
    """Grid steps between a search point (of ``stage``) and the configured settings: per grid axis, from
    the value nearest the configured one; per move around a winner, from no move (× 1 or + 0)."""
    configured = grid.settings(point)
    steps = 0
    for axis, value in point.grid.items():
        values = list(stage["grid"][axis])
        target = cl_config.setting_value(configured, axis)
        nearest = min(
            range(len(values)),
            key=lambda i: abs(values[i] - target) if _numbers(values[i], target) else values[i] != target,
        )
        steps += abs(values.index(value) - nearest)
    for axis, (op, amount) in point.around.items():
        moves = list(stage["around"][axis][op])
        neutral = 1.0 if op == "times" else 0.0
        nearest = min(range(len(moves)), key=lambda i: abs(moves[i] - neutral))
        steps += abs(moves.index(amount) - nearest)
    return steps


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _point_id(point: cl_search.SearchPoint) -> str:
    return f"{point.backbone}/{point.name}/seed{point.seed}"


def _search_fingerprint(spec: Mapping[str, Any], group: Iterable[cl_search.SearchPoint]) -> str:
    """What a pin is valid for: the search's spec (budget included) and every candidate point."""
    text = json.dumps(
        {"spec": dict(spec), "points": [_point_id(p) for p in group]}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pinned(grid: cl_config.Grid) -> dict[str, Any]:
    """The pins an earlier run of the grid's results folder wrote (:func:`write_pins`), or ``{}``."""
    return read_json(grid.results.budget_pins)


def plan_points(grid: cl_config.Grid, calibration: Calibration | None = None) -> list[cl_search.SearchPoint]:
    """The search points the default target trains (:func:`searched_points` with the results folder's
    pins); none with ``searches.in_all: false``."""
    return searched_points(grid, calibration, pins=pinned(grid)) if grid.options.searches_in_all else []


def write_pins(grid: cl_config.Grid, points: Iterable[cl_search.SearchPoint]) -> Path | None:
    """Pin, per budgeted search, the points it kept (when the workflow starts executing), leaving a pin
    that still matches. Returns the file, or None without a budget."""
    points = list(points)
    pins = pinned(grid)
    candidates = cl_search.search_points(grid)
    for experiment, group in grouped(candidates, lambda p: p.experiment).items():
        spec = grid.experiment(experiment).search or {}
        budget = spec.get("budget_gpu_hours")
        if budget is None:
            continue
        fingerprint = _search_fingerprint(spec, group)
        if (pins.get(experiment) or {}).get("fingerprint") != fingerprint:
            kept = [_point_id(p) for p in points if p.experiment == experiment]
            pins[experiment] = {"fingerprint": fingerprint, "budget_gpu_hours": budget, "points": kept}
    if not pins:
        return None
    path = Path(grid.results.budget_pins)
    write_json(path, pins)
    return path


def searched_points(
    grid: cl_config.Grid, calibration: Calibration | None = None, pins: Mapping[str, Any] | None = None
) -> list[cl_search.SearchPoint]:
    """The points of the config's searches that each ``budget_gpu_hours`` pays for, in grid order: taken
    nearest the configured settings first (then earlier stage, grid order) at their projected training
    time (a point shared with a configured cell costs nothing), dropping any that would pass the budget;
    a search whose pin (``pins``) still matches keeps its pinned points. Raises
    :class:`~contrastlab.config.ConfigError` when a stage keeps no point."""
    points = cl_search.search_points(grid)
    kept: list[cl_search.SearchPoint] = []
    for experiment, group in grouped(points, lambda p: p.experiment).items():
        spec = grid.experiment(experiment).search or {}
        budget = spec.get("budget_gpu_hours")
        if budget is None:
            kept += group
            continue
        pin = (pins or {}).get(experiment) or {}
        if pin.get("fingerprint") == _search_fingerprint(spec, group):
            ids = set(pin["points"])
            kept += [p for p in group if _point_id(p) in ids]
            continue
        calibration = calibration or load_calibration()
        distances = [_distance(grid, p, spec["stages"][p.method][p.stage - 1]) for p in group]
        ranked = sorted(range(len(group)), key=lambda i: (distances[i], group[i].stage, i))
        used, chosen = 0.0, set()
        for i in ranked:
            point = group[i]
            hours = 0.0
            if point.shared_with is None:
                hours = train_seconds(cell_work(grid, point.cell, point=point), calibration) / 3600
            if used + hours <= budget:
                chosen.add(i)
                used += hours
        # every stage of every search keeps a point; the first left empty (search, then stage order) is named
        filled = {(group[i].backbone, group[i].method, group[i].stage) for i in chosen}
        empty = [s for s in dict.fromkeys((p.backbone, p.method, p.stage) for p in group) if s not in filled]
        if empty:
            backbone, method, stage = empty[0]
            raise cl_config.ConfigError(
                f"config key experiments.{experiment}.search.budget_gpu_hours: {budget:g} GPU-h "
                f"leaves stage {stage} of the {method} search on {backbone} without a point; "
                "raise the budget or shrink the grid"
            )
        kept += [p for i, p in enumerate(group) if i in chosen]
    return kept
