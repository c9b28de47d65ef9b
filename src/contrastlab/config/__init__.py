"""The experiment configuration: validation against the JSON Schema, defaults, and the grid of cells.

A *cell* is one (experiment, backbone, method, seed): one training job and one evaluation job.
``config.yaml`` states each paper's grid as data (see ``schemas/config.schema.yaml``); a
:class:`~contrastlab.config.grid.Grid` built once from the validated config lists the cells and resolves
every cell's settings (its docstring states the resolution order), so the Snakefile, the plan and the
report read the same settings.

The rooms (``schema``, ``templates``, ``checks``, ``searches``, ``data``, ``grid``) say what each holds;
``validate`` and ``load`` live here, so that those do not import each other in a circle. Nothing here
imports torch, so the workflow parses fast.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contrastlab.config.checks import (
    check_folders,
    check_logging,
    check_mteb,
    check_oar_synthetic,
    check_references,
    check_searches,
    check_select,
    check_step_switches,
)
from contrastlab.config.command_line import check_command_paths, check_command_strings
from contrastlab.config.grid import (
    SWEEP_LABELS,
    Cell,
    Experiment,
    Grid,
    MethodOn,
    Options,
    apply_overrides,
    expanded_methods,
    override_precision,
    setting_value,
    settings_digest,
    sweep_points,
)
from contrastlab.config.invocation import read_config
from contrastlab.config.schema import (
    ConfigError,
    coerce_scalars,
    deep_merge,
    fill_defaults,
    key_path,
    load_schema,
)
from contrastlab.config.searches import RELATIVE_OPS
from contrastlab.config.templates import expand_templates
from contrastlab.papers import paper_of  # a name's paper, by the config's naming (re-exported)

#: The face of the package: what the Snakefile, the scripts and the library read (``cl_config.<name>``).
__all__ = [
    "RELATIVE_OPS",
    "SWEEP_LABELS",
    "Cell",
    "Experiment",
    "Grid",
    "MethodOn",
    "Options",
    "ConfigError",
    "apply_overrides",
    "check_command_paths",
    "deep_merge",
    "expanded_methods",
    "load",
    "load_schema",
    "override_precision",
    "paper_of",
    "settings_digest",
    "sweep_points",
    "setting_value",
    "validate",
]


#: How a config writes a value of each schema type: the fix a value of the wrong type is told.
_FORMS = {"array": "a list: [a, b]", "object": "a mapping: {key: value}", "integer": "a whole number"}
_FORMS |= {"number": "a number", "string": 'text: "..."', "boolean": "true or false", "null": "null"}
#: The fix a schema bound or size is told: the value it takes (``{}``: the bound).
_FIXES = {"minimum": "set it to a value >= {}", "exclusiveMinimum": "set it to a value > {}"}
_FIXES |= {"maximum": "set it to a value <= {}", "exclusiveMaximum": "set it to a value < {}"}
_FIXES |= {"minItems": "give it at least {} value(s)", "maxItems": "give it at most {} value(s)"}
_FIXES |= {"minProperties": "give it at least {} key(s)", "minLength": "give it at least {} character(s)"}


def _forms(kinds: str | list[str]) -> str:
    return " or ".join(_FORMS[kind] for kind in ([kinds] if isinstance(kinds, str) else kinds))


def validate(config: Mapping[str, Any]) -> dict:
    """Validate ``config`` against the schema and the cross-references; return it with defaults filled.

    Raises ``ConfigError`` with a one-line message for the first problem found.
    """
    import jsonschema

    schema = load_schema()
    # First: a string a shell would interpret is refused before anything reads it (G12).
    check_command_strings(config)
    config = expand_templates(copy.deepcopy(dict(config)))
    config = coerce_scalars(config, schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        error = errors[0]
        path = list(error.absolute_path)
        message = error.message
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = sorted(error.schema.get("properties", {}))
            path.append(sorted(set(error.instance) - set(allowed))[0])
            message = f"unknown key (typo?); allowed here: {', '.join(allowed)}"
        elif error.validator == "uniqueItems":  # jsonschema's own "has non-unique elements" names no value
            repeated = next(v for i, v in enumerate(error.instance) if v in error.instance[:i])
            message = f"{repeated!r} is listed twice; list each value once"
        elif error.validator == "type":  # jsonschema's names the JSON type, not how YAML writes it
            message += f"; write {key_path(path)} as {_forms(error.validator_value)}"
        elif error.validator == "enum":  # jsonschema's lists Python's reprs: None for YAML's null
            choices = ", ".join(v if isinstance(v, str) else json.dumps(v) for v in error.validator_value)
            message = f"{error.instance!r} is not one of {choices}; set {key_path(path)} to one of them"
        elif error.validator == "required" and not path:  # a partial preset: Snakemake merges nothing in
            message += "; a --configfile replaces config.yaml whole: start from a copy of it or of a preset"
        elif error.validator == "required":
            missing = next(key for key in error.validator_value if key not in error.instance)
            sub = error.schema.get("properties", {}).get(missing, {})
            form = f" as {_forms(sub['type'])}" if "type" in sub else ""
            form = f": one of {', '.join(map(str, sub['enum']))}" if "enum" in sub else form
            message += f"; add {key_path([*path, missing])}{form}"
        elif error.validator == "oneOf":  # a backbone's forms, each the keys it requires
            forms = [
                " and ".join(s.get("required", ()))
                for b in error.validator_value
                for s in b.get("anyOf", [b])
            ]
            message += f"; give it {', '.join(forms[:-1])}, or {forms[-1]}" if all(forms) else ""
        elif error.validator in _FIXES:
            n = error.validator_value
            message += "; " + _FIXES[error.validator].format(n).replace("(s)", "s" if n != 1 else "")
        raise ConfigError(f"config key {key_path(path)}: {message}")
    config = fill_defaults(config, schema)
    # Only the global training block gets the defaults: overrides lower down must stay partial.
    for key in ("training", "vision_training", "vision_evaluation"):
        config[key] = fill_defaults(config[key], schema["$defs"][key])
    for check in (check_folders, check_references, check_searches, check_select, check_mteb, check_logging):
        check(config)
    check_oar_synthetic(config)
    check_step_switches(config)
    return config


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict:
    """Read a YAML config, apply ``overrides`` (deep-merged), and validate it."""
    path = Path(path)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise ConfigError(f"config file {path} {what}; pass an existing YAML file")
    return validate(deep_merge(read_config(path), overrides or {}))
