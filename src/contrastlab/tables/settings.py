"""The configured hyperparameters of one (experiment, method, backbone) cell, for the tables.

:func:`method_settings` uses ``contrastlab.config.method_settings`` when it exists and otherwise a
local resolution of the config dict (``docs/contracts.md``): top-level ``training`` defaults <- the
experiment's ``training`` <- the method's entry <- its ``per_backbone[backbone]``; ``hp`` dicts are
merged key by key. :func:`param_value` reads one parameter from the result.
"""

from __future__ import annotations

import copy
from typing import Any

#: Parameters that are training settings; every other parameter is a loss hyperparameter.
TRAINING_PARAMS = ("lr", "batch_size")


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if key == "per_backbone":
            continue
        if key in ("hp", "loss_hp") and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_settings(config: dict, experiment: str, method: str, backbone: str) -> dict[str, Any]:
    """Local fallback for ``contrastlab.config.method_settings``: a flat dict with ``loss``, ``hp``,
    ``lr``, ``batch_size`` and the training defaults. Raises KeyError when the method is not configured."""
    exp = config["experiments"][experiment]
    entry = exp["methods"][method]
    flat = _merge(dict(config.get("training") or {}), exp.get("training") or {})
    flat = _merge(flat, entry)
    flat = _merge(flat, (entry.get("per_backbone") or {}).get(backbone) or {})
    return flat


def method_settings(config: dict, experiment: str, method: str, backbone: str) -> dict[str, Any] | None:
    """The resolved settings of one cell, or None when ``method`` is not configured for ``experiment``."""
    methods = (config.get("experiments", {}).get(experiment) or {}).get("methods") or {}
    if method not in methods:
        return None
    try:
        from contrastlab.config import method_settings as resolve  # type: ignore[attr-defined]
    except ImportError:
        resolve = resolve_settings
    return resolve(config, experiment, method, backbone)


def _loss_defaults(loss: str | None) -> dict[str, Any]:
    try:
        from contrastlab.losses.catalog import DEFAULTS  # type: ignore[import-not-found]
    except ImportError:
        return {}
    return dict(DEFAULTS.get(loss, {})) if loss else {}


def param_value(settings: dict[str, Any], param: str) -> tuple[Any, bool]:
    """``(value, is_default)`` of ``param`` in resolved ``settings``; value None when unset.

    Loss hyperparameters are read from ``hp`` (or ``loss_hp``), falling back to the loss's catalog
    default (``contrastlab.losses.catalog.DEFAULTS``) when the config leaves them out.
    """
    if param in TRAINING_PARAMS:
        return settings.get(param), False
    hp = settings.get("hp") or settings.get("loss_hp") or {}
    if param in hp:
        return hp[param], False
    defaults = _loss_defaults(settings.get("loss"))
    if param in defaults:
        return defaults[param], True
    return None, False
