"""An experiment's ``search:`` section read once: its defaults filled and its mistakes one-line errors
(:func:`search_spec`, which :attr:`contrastlab.config.Experiment.search` answers). What a search *does* (its
points as cells, dev selection) is :mod:`contrastlab.search`, above this layer."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from contrastlab.config.schema import ConfigError, check_values, load_schema, with_fix
from contrastlab.losses.catalog import DEFAULTS, check_hyperparameters
from contrastlab.losses.user import UserLossError, is_user_loss, resolve_user_loss

#: The keys of a relative axis (``around``) and how a point's name writes each.
RELATIVE_OPS = {"times": "x", "plus": "+"}


def search_spec(config: Mapping[str, Any], experiment: str) -> dict | None:
    """The experiment's ``search`` section with defaults filled (None without one); raises
    :class:`ConfigError` (one line) for an unknown method, backbone, seed or axis (a stage's shape is the
    schema's ``search_stage``, checked first)."""
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
    per_method = raw.get("per_method") or {}
    methods = _searched_methods(exp, raw.get("methods"), per_method, where)
    backbones = list(raw.get("backbones") or exp["backbones"])
    for backbone in backbones:
        if backbone not in exp["backbones"]:
            raise ConfigError(
                f"config key {where}.backbones: {backbone!r} is not one of the experiment's backbones "
                f"({', '.join(exp['backbones'])})"
            )
    seeds = exp.get("seeds") or config["seeds"]
    seed = int(raw.get("seed", seeds[0]))
    stages = {m: (per_method.get(m) or {}).get("stages") or raw.get("stages") or [] for m in methods}
    keys = _searchable_keys()
    for method, method_stages in stages.items():
        at = f"{where}.per_method.{method}" if method in per_method else where
        if not method_stages:
            raise ConfigError(
                f"config key {at}.stages: a search needs at least one stage (a grid), and method {method!r} "
                f"has none; give {where}.stages or {where}.per_method.{method}.stages"
            )
        for k, stage in enumerate(method_stages, start=1):
            _check_stage(stage, k, f"{at}.stages[{k - 1}]", keys)
            _check_loss_axes(exp, method, stage, f"{at}.stages[{k - 1}]")
    return {
        "methods": methods,
        "backbones": backbones,
        "seed": seed,
        "stages": stages,
        "budget_gpu_hours": raw.get("budget_gpu_hours"),
    }


def _searched_methods(exp: Mapping[str, Any], listed: Any, per_method: Mapping[str, Any], where: str) -> list:
    """The methods a search names: ``methods`` in its order, then the keys of ``per_method`` it leaves
    out (in the experiment's order). A method named in neither is not searched, so adding a method to an
    experiment never adds it to a search whose axes it may lack."""
    if not listed and not per_method:
        raise ConfigError(
            f"config key {where}.methods: name the methods to search (methods: [{', '.join(exp['methods'])}] "
            "or per_method: {<method>: {stages: ...}}); a search searches only the methods it names"
        )
    named = list(listed or [])
    named += [m for m in exp["methods"] if m in per_method and m not in named]
    for method in [*named, *per_method]:
        if method not in exp["methods"]:
            key = "methods" if method in (listed or []) else f"per_method.{method}"
            choices = ", ".join(exp["methods"])
            raise ConfigError(f"config key {where}.{key}: unknown method {method!r}; choose from {choices}")
    return named


def _check_loss_axes(exp: Mapping[str, Any], method: str, stage: Mapping[str, Any], where: str) -> None:
    """Each ``hp.<name>`` axis of ``stage`` is a hyperparameter of ``method``'s loss (a built-in one's
    catalog defaults, a user loss's signature): a search never sends a loss a keyword it does not take."""
    loss = exp["methods"][method]["loss"]
    takes = _loss_hyperparameters(loss)
    if takes is None:  # an unknown or broken loss: the methods' own check names it
        return
    for axis in [*(stage.get("grid") or {}), *(stage.get("around") or {})]:
        name = axis.removeprefix("hp.")
        if axis.startswith("hp.") and name not in takes:
            raise ConfigError(
                f"config key {where}.{axis}: method {method!r} (loss {loss!r}) has no hyperparameter "
                f"{name!r}; it takes {', '.join(takes) or 'none'}. Give {method!r} stages of its own "
                f"(per_method.{method}) or leave it out of the search's methods"
            )
    for axis, values in (stage.get("grid") or {}).items():
        for k, value in enumerate(values if axis.startswith("hp.") and loss in DEFAULTS else []):
            try:
                check_hyperparameters(loss, {axis.removeprefix("hp."): value})
            except ValueError as error:
                raise ConfigError(f"config key {where}.grid.{axis}[{k}]: {with_fix(error)}") from None


def _loss_hyperparameters(loss: str) -> tuple[str, ...] | None:
    """The hyperparameters loss ``loss`` takes; None for a name that is neither built in nor importable."""
    if loss in DEFAULTS:
        return tuple(DEFAULTS[loss])
    try:
        return resolve_user_loss(loss).hyperparameters if is_user_loss(loss) else None
    except UserLossError:
        return None


@functools.cache
def _searchable_keys() -> frozenset[str]:
    """The sentence training keys a search may vary (read from the schema once: every table row and
    plan point asks)."""
    schema = load_schema()["$defs"]["training"]["properties"]
    return frozenset(schema) - {"precision", "protocol"}


def _check_stage(stage: Mapping[str, Any], k: int, where: str, keys: frozenset[str]) -> None:
    """What the schema's ``search_stage`` (the stage's keys, lists and numbers, checked first) cannot
    say: an axis, each searchable and its grid values ones its key takes, no ``around`` in stage 1."""
    if not stage:
        raise ConfigError(f"config key {where}: a stage is {{grid: {{axis: [values]}}, around: {{...}}}}")
    axes = list(stage.get("grid") or {}) + list(stage.get("around") or {})
    if not axes:
        raise ConfigError(f"config key {where}: the stage has no axis; give it grid: {{axis: [values]}}")
    for axis in axes:
        if axis not in keys and not axis.startswith("hp."):
            raise ConfigError(
                f"config key {where}.{axis}: not a searchable setting; use a training key or hp.<name>"
            )
    for axis, values in (stage.get("grid") or {}).items():
        if not axis.startswith("hp."):
            check_values(f"{where}.grid.{axis}", values, f"training.{axis}")
    if k == 1 and stage.get("around"):
        raise ConfigError(f"config key {where}.around: stage 1 has no earlier winner; use grid")
    if set(stage.get("grid") or {}) & set(stage.get("around") or {}):
        raise ConfigError(f"config key {where}: an axis is either in grid or in around, not both")
