"""The search budget: which points of a config's searches their ``budget_gpu_hours`` pays for, nearest the
configured settings first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.cost.calibration import Calibration, load_calibration, train_seconds
from contrastlab.cost.flops import cell_work


# ------------------------------------------------------------------------------------------- searches
def _distance(config: Mapping[str, Any], point: cl_search.SearchPoint, stage: Mapping[str, Any]) -> int:
    """Grid steps between a search point (of ``stage``) and the configured settings: per grid axis, how
    many values lie between the point's and the one nearest the configured value; per move around a
    winner, how many lie between it and no move (× 1 or + 0)."""
    configured = cl_config.method_settings(config, point.experiment, point.method, point.backbone)
    steps = 0
    for axis, value in point.grid.items():
        values = list(stage["grid"][axis])
        target = cl_search.setting_value(configured, axis)
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


def searched_points(
    config: Mapping[str, Any], calibration: Calibration | None = None
) -> list[cl_search.SearchPoint]:
    """The points of the config's searches (:func:`contrastlab.search.search_points`) that each search's
    ``budget_gpu_hours`` pays for, in grid order. The stated trimming order: points nearest the
    configured settings first (:func:`_distance`; ties: earlier stage, then grid order), each at its
    projected training time as configured (a point shared with a configured cell costs nothing); a point
    that would pass the budget is dropped. Raises :class:`~contrastlab.config.ConfigError` when a stage
    of a search keeps no point."""
    points = cl_search.search_points(config)
    kept: list[cl_search.SearchPoint] = []
    for experiment in dict.fromkeys(p.experiment for p in points):
        group = [p for p in points if p.experiment == experiment]
        spec = cl_search.search_spec(config, experiment) or {}
        budget = spec.get("budget_gpu_hours")
        if budget is None:
            kept += group
            continue
        calibration = calibration or load_calibration()
        distances = [_distance(config, p, spec["stages"][p.method][p.stage - 1]) for p in group]
        ranked = sorted(range(len(group)), key=lambda i: (distances[i], group[i].stage, i))
        used, chosen = 0.0, set()
        for i in ranked:
            point = group[i]
            hours = 0.0
            if point.shared_with is None:
                hours = train_seconds(cell_work(config, point.cell, point=point), calibration) / 3600
            if used + hours <= budget:
                chosen.add(i)
                used += hours
        for (_, backbone, method), stages in cl_search.searches(group).items():
            for stage, members in stages.items():
                if not any(group.index(p) in chosen for p in members):
                    raise cl_config.ConfigError(
                        f"config key experiments.{experiment}.search.budget_gpu_hours: {budget:g} GPU-h "
                        f"leaves stage {stage} of the {method} search on {backbone} without a point; "
                        "raise the budget or shrink the grid"
                    )
        kept += [p for i, p in enumerate(group) if i in chosen]
    return kept
