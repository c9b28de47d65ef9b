"""An experiment's ``search:`` section read once: its defaults filled and its mistakes one-line errors
(:func:`search_spec`, which :attr:`contrastlab.config.Experiment.search` answers). What a search *does* (its
points as cells, dev selection) is :mod:`contrastlab.search`, above this layer."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from contrastlab.config.schema import ConfigError, load_schema

#: Keys of a stage and of a relative axis.
STAGE_KEYS = ("grid", "around")
RELATIVE_OPS = {"times": "x", "plus": "+"}


def search_spec(config: Mapping[str, Any], experiment: str) -> dict | None:
    """The experiment's ``search`` section with defaults filled (None without one); raises
    :class:`ConfigError` (one line) for an unknown method, backbone, seed, axis or stage key."""
    exp = config["experiments"][experiment]
    raw = exp.get("search")
    if not raw:
        return None
    where = f"experiments.{experiment}.search"
    if (exp.get("track") or "sentence") == "vision":
        raise ConfigError(
            f"config key {where}: image experiments are not searchable yet (their trainers keep no "
            "held-out accuracy to select on); remove the search or move it to a sentence experiment"
        )
    methods = list(raw.get("methods") or exp["methods"])
    for method in methods:
        if method not in exp["methods"]:
            raise ConfigError(
                f"config key {where}.methods: unknown method {method!r}; "
                f"choose from {', '.join(exp['methods'])}"
            )
    backbones = list(raw.get("backbones") or exp["backbones"])
    for backbone in backbones:
        if backbone not in exp["backbones"]:
            raise ConfigError(
                f"config key {where}.backbones: {backbone!r} is not one of the experiment's backbones "
                f"({', '.join(exp['backbones'])})"
            )
    seeds = exp.get("seeds") or config["seeds"]
    seed = int(raw.get("seed", seeds[0]))
    per_method = raw.get("per_method") or {}
    for method in per_method:
        if method not in methods:
            raise ConfigError(f"config key {where}.per_method.{method}: not one of the searched methods")
    stages = {m: (per_method.get(m) or {}).get("stages") or raw.get("stages") or [] for m in methods}
    keys = _searchable_keys()
    for method, method_stages in stages.items():
        at = f"{where}.per_method.{method}" if method in per_method else where
        if not method_stages:
            raise ConfigError(f"config key {at}.stages: a search needs at least one stage (a grid)")
        for k, stage in enumerate(method_stages, start=1):
            _check_stage(stage, k, f"{at}.stages[{k - 1}]", keys)
    return {
        "methods": methods,
        "backbones": backbones,
        "seed": seed,
        "stages": stages,
        "budget_gpu_hours": raw.get("budget_gpu_hours"),
    }


@functools.cache
def _searchable_keys() -> frozenset[str]:
    """The sentence training keys a search may vary (read from the schema once: every table row and
    plan point asks)."""
    schema = load_schema()["$defs"]["training"]["properties"]
    return frozenset(schema) - {"precision", "protocol"}


def _check_stage(stage: Any, k: int, where: str, keys: frozenset[str]) -> None:
    if not isinstance(stage, Mapping) or not stage or set(stage) - set(STAGE_KEYS):
        raise ConfigError(f"config key {where}: a stage is {{grid: {{axis: [values]}}, around: {{...}}}}")
    axes = list(stage.get("grid") or {}) + list(stage.get("around") or {})
    if not axes:
        raise ConfigError(f"config key {where}: the stage has no axis")
    for axis in axes:
        if axis not in keys and not axis.startswith("hp."):
            raise ConfigError(
                f"config key {where}.{axis}: not a searchable setting; use a training key or hp.<name>"
            )
    for axis, values in (stage.get("grid") or {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"config key {where}.grid.{axis}: a non-empty list of values")
    for axis, rel in (stage.get("around") or {}).items():
        if k == 1:
            raise ConfigError(f"config key {where}.around: stage 1 has no earlier winner; use grid")
        if not isinstance(rel, Mapping) or len(rel) != 1 or next(iter(rel)) not in RELATIVE_OPS:
            raise ConfigError(
                f"config key {where}.around.{axis}: give {{times: [factors]}} or {{plus: [offsets]}}"
            )
        values = next(iter(rel.values()))
        if not isinstance(values, list) or not values or not all(isinstance(v, int | float) for v in values):
            raise ConfigError(f"config key {where}.around.{axis}: a non-empty list of numbers")
    if set(stage.get("grid") or {}) & set(stage.get("around") or {}):
        raise ConfigError(f"config key {where}: an axis is either in grid or in around, not both")
