"""The configured hyperparameters of one (experiment, method, backbone) cell, for the tables.

:func:`method_settings` resolves a cell with ``contrastlab.config.method_settings`` (the same
resolution the workflow trains with) and records which loss hyperparameters the config sets
explicitly; :func:`param_value` reads one parameter from the result.
"""

from __future__ import annotations

from typing import Any

from contrastlab.config import method_settings as resolve

#: Parameters that are training settings; every other parameter is a loss hyperparameter.
TRAINING_PARAMS = ("lr", "batch_size")


def method_settings(config: dict, experiment: str, method: str, backbone: str) -> dict[str, Any] | None:
    """The resolved settings of one cell, or None when ``method`` is not configured for ``experiment``.

    ``explicit_hp`` holds the loss hyperparameters the config states (method ``hp`` and
    ``per_backbone[backbone].hp``); the others in ``loss_hp`` are the loss's catalog defaults.
    """
    methods = (config.get("experiments", {}).get(experiment) or {}).get("methods") or {}
    if method not in methods:
        return None
    spec = methods[method]
    settings = resolve({"training": {}, **config}, experiment, method, backbone)
    per_backbone = (spec.get("per_backbone") or {}).get(backbone) or {}
    settings["explicit_hp"] = {**(spec.get("hp") or {}), **(per_backbone.get("hp") or {})}
    return settings


def param_value(settings: dict[str, Any], param: str) -> tuple[Any, bool]:
    """``(value, is_default)`` of ``param`` in resolved ``settings``; value None when unset.

    A loss hyperparameter the config leaves out is the loss's catalog default (``is_default`` True).
    """
    if param in TRAINING_PARAMS:
        return settings.get(param), False
    hp = settings.get("loss_hp") or {}
    if param in hp:
        return hp[param], param not in settings.get("explicit_hp", {})
    return None, False
