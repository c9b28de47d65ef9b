"""The config's JSON Schema (``config.schema.yaml``, package data beside this module, which the checkout's
``schemas/config.schema.yaml`` links to): loading it, coercing ``--config`` text the way the schema types it
(Snakemake hands nested ``--config`` values over as strings), filling defaults, and one-line errors.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import re
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from contrastlab.paths import read_yaml

SCHEMA_NAME = "config.schema.yaml"


class ConfigError(ValueError):
    """A config value is wrong; the message is one line naming the key and the fix."""


def schema_file() -> Traversable:
    """The schema file, package data of ``contrastlab.config``: found through ``importlib.resources``,
    so that an installed wheel reads its own copy, with no checkout beside it."""
    return importlib.resources.files(__package__) / SCHEMA_NAME


def load_schema() -> dict:
    """The schema as a dict of the caller's own (a copy: callers may fill or change it)."""
    resource = schema_file()
    # Read again when the file changes; a zipped package's data has no mtime (read once per process).
    stamp = resource.stat().st_mtime_ns if isinstance(resource, Path) else 0
    return copy.deepcopy(_schema(stamp))


@functools.cache
def _schema(mtime_ns: int) -> dict:
    # Read once per process (and again if the file changes): every Snakemake job's process validates
    # the config while it reads the Snakefile, and pure-Python YAML took ~0.17 s per read of this
    # 50 KB file, read 2-3 times per parse. libyaml's loader (paths.read_yaml) reads it in ~0.02 s.
    with importlib.resources.as_file(schema_file()) as path:
        return read_yaml(path)


def key_path(parts: Any) -> str:
    """A schema error's location as the config key a user writes (``experiments.nie2023.seeds[0]``)."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"


def fill_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """Insert schema ``default``s for missing object keys, recursively (also into additionalProperties)."""
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key in value:
            if (sub := props.get(key, extra if isinstance(extra, dict) else None)) is not None:
                value[key] = fill_defaults(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [fill_defaults(item, schema["items"]) for item in value]
    return value


_SCALAR_TYPES = {"integer": int, "number": (int, float), "boolean": bool, "null": type(None)}


#: A YAML 1.2 float (``1e-5`` included, which YAML 1.1 reads as text); ``inf`` or ``nan`` stay text
#: where text is allowed.
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _coerce_text(text: str, types: list[str]) -> Any:
    """``text`` as the first scalar type of ``types`` it parses to (YAML 1.2 rules), else unchanged.

    Where ``types`` allows text too (a loss hyperparameter, a sweep value), ``text`` is typed as YAML
    types it in a file: ``0.1`` a number, ``true`` a boolean, ``exp`` text.
    """
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        parsed = text
    if isinstance(parsed, str):  # YAML 1.1 reads 3e-5 (no dot) as a string; Python reads it as a float
        if "string" in types and not _FLOAT.fullmatch(text.strip()):
            return text
        try:
            parsed = float(text)
        except ValueError:
            return text
    for kind in types:
        wanted = _SCALAR_TYPES.get(kind)
        if wanted is None or (isinstance(parsed, bool) and kind != "boolean"):
            continue
        if isinstance(parsed, wanted):
            return float(parsed) if kind == "number" and not isinstance(parsed, int) else parsed
        if kind == "integer" and isinstance(parsed, float) and parsed.is_integer() and "." not in text:
            return int(parsed)  # 1e3 written for an integer
    return text


def _branch(schema: Mapping[str, Any], value: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``then`` or ``else`` schema that ``schema``'s ``if`` selects for ``value`` (an experiment's
    ``training`` blocks are read per its ``track``); ``{}`` when it selects none."""
    import jsonschema

    selected = jsonschema.Draft202012Validator(schema["if"]).is_valid(value)
    return (schema["then"] if selected else schema.get("else")) or {}


def coerce_scalars(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """Convert strings to the number/boolean/null types the schema expects, recursively.

    Snakemake hands nested ``--config`` values over as text (``training={batch_size: 32}`` gives
    ``"32"``), and YAML 1.1 reads ``lr: 3e-5`` as a string; both must mean what they mean in a config
    file. Keys whose schema allows only a string are left alone; a key that allows a string or a number
    or boolean (a loss hyperparameter, a sweep value) gets the type YAML gives the text in a file; text
    that is not a valid number or boolean stays text, so the schema check still names it.
    """
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "if" in schema and isinstance(value, dict):
        # The branch types what it states (a method's training block per track) and the schema around
        # it all the rest (a method's lr, batch_size, per_backbone): both apply, as in validation.
        value = coerce_scalars(value, _branch(schema, value), root)
        schema = {key: sub for key, sub in schema.items() if key not in ("if", "then", "else")}
    if isinstance(value, str):
        types = schema.get("type", [])
        types = [types] if isinstance(types, str) else list(types)
        if types and ("string" not in types or {"number", "integer", "boolean"} & set(types)):
            return _coerce_text(value, types)
        if "null" in types and value.strip() in ("null", "~", "None"):  # `data={senteval_dir: null}`
            return None
        return value
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, sub in value.items():
            if (sub_schema := props.get(key, extra if isinstance(extra, dict) else None)) is not None:
                value[key] = coerce_scalars(sub, sub_schema, root)
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_scalars(item, schema["items"], root) for item in value]
    return value


def with_fix(error: ValueError) -> str:
    """A loss's bound, ``"<loss>: <key> must be <bound>, got <value>"``, followed by the fix (the bound
    :func:`contrastlab.losses.catalog.check_hyperparameters` keeps on its error)."""
    bound = getattr(error, "bound", "")
    if not bound or bound.startswith("one of"):  # the choices are the fix
        return str(error)
    return f"{error}; set it to {bound if bound.startswith(('a ', 'true')) else 'a value ' + bound}"


def check_values(where: str, values: list, setting: str) -> None:
    """Each of ``values`` (a sweep's or a search grid's axis, at config key ``where``) is one the schema's
    ``setting`` (``training.lr``, ``vision_training.batch_size``) takes: one line naming the first that
    is not (such a value reached the train job as text)."""
    import jsonschema

    defs = load_schema()["$defs"]
    section, key = setting.split(".")
    validator = jsonschema.Draft202012Validator({"$defs": defs, **defs[section]["properties"][key]})
    for k, value in enumerate(values):
        if error := next(iter(validator.iter_errors(value)), None):
            raise ConfigError(f"config key {where}[{k}]: {error.message}; give a value {setting} takes")


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict:
    """Merge ``update`` into a copy of ``base``; nested mappings merge, everything else replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
