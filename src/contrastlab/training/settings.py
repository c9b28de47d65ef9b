"""A trainer's settings dataclass against the config schema, and the settings that identify a snapshot:
shared by the sentence, image and synthetic trainers (:mod:`contrastlab.training.runtime` runs them)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from contrastlab.config.schema import load_schema

#: Settings that change no number of a run: left out of its snapshot fingerprint (a snapshot written with
#: another value, or before the setting existed, resumes).
NOT_IN_FINGERPRINT = ("tensorboard",)
_UNSET = object()


class Settings:
    """A trainer's settings dataclass: ``from_dict`` of a flat mapping and ``to_dict`` as plain JSON values
    (mappings as dicts, tuples as lists), so that ``from_dict(to_dict())`` gives them back."""

    WHAT: ClassVar[str]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """``cls(**values)``; unknown keys raise one line naming them and the valid ones (``WHAT``: e.g.
        "vision training"). A whole float for an integer field is that integer: the schema's "integer"
        takes ``batch_size: 16.0``, which a trainer's slices and ranges do not."""
        types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(types))
        if unknown:
            valid = ", ".join(sorted(types))
            raise ValueError(f"unknown {cls.WHAT} setting(s) {', '.join(unknown)}; valid: {valid}")
        whole = {
            name: int(value)
            for name, value in values.items()
            if isinstance(value, float) and value.is_integer() and types[name].startswith("int")
        }
        return cls(**{**values, **whole})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, tuple) else value


@functools.cache
def _schema_of(defs_key: str):
    """The validator and the properties of the config schema's ``$defs[defs_key]`` (loaded once)."""
    import jsonschema

    defs = load_schema()["$defs"]
    properties = defs[defs_key]["properties"]
    return jsonschema.Draft202012Validator(
        {"$defs": defs, "type": "object", "properties": properties}
    ), properties


def check_against_schema(settings: Settings, defs_key: str) -> None:
    """Check every field of a settings dataclass that the config schema's ``$defs[defs_key]`` describes
    (type, choices, bounds), so that the schema states each bound once; raise one line naming the
    first field that fails (e.g. "batch_size must be >= 2, got 1"). The dataclasses keep only the checks
    that span several fields."""
    validator, properties = _schema_of(defs_key)
    values = {name: value for name, value in settings.to_dict().items() if name in properties}
    errors = sorted(validator.iter_errors(values), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return
    error = errors[0]
    name = str(error.path[0]) if error.path else "?"
    value = values.get(name)
    # an item of a list field is named by its index: "jitter[3] must be <= 0.5, got [0.4, 0.4, 0.4, 0.6]"
    where = name + "".join(f"[{index}]" for index in list(error.path)[1:])
    top = len(error.path) == 1
    nullable = " or None" if top and "null" in (properties.get(name, {}).get("type") or []) else ""
    words = {
        "enum": lambda bound: f"must be one of {', '.join(map(str, bound))}",
        "minimum": lambda bound: f"must be >= {bound}{nullable}",
        "exclusiveMinimum": lambda bound: f"must be > {bound}{nullable}",
        "maximum": lambda bound: f"must be <= {bound}",
        "exclusiveMaximum": lambda bound: f"must be < {bound}",
        "type": lambda bound: "must be true or false" if bound == "boolean" else f"must be of type {bound}",
        "minItems": lambda bound: f"must have at least {bound} items",
        "maxItems": lambda bound: f"must have at most {bound} items",
    }
    rule = words.get(error.validator)
    text = rule(error.validator_value) if rule and error.path else error.message
    raise ValueError(f"{where} {text}, got {value!r}")


def fingerprint_settings(
    settings: Mapping[str, Any], later_defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A settings dict without the keys that change no number (:data:`NOT_IN_FINGERPRINT`) and without
    ``later_defaults``' keys where they hold their default: settings added after snapshots existed count
    only when set, so a snapshot written before them still resumes. A default given as a frozenset
    stands for each of its values (a setting whose default became "auto", ``None``, keeps the old
    default's snapshots too)."""
    later_defaults = later_defaults or {}

    def at_default(key: str, value: Any) -> bool:
        default = later_defaults.get(key, _UNSET)
        return value in default if isinstance(default, frozenset) else default == value

    return {k: v for k, v in settings.items() if k not in NOT_IN_FINGERPRINT and not at_default(k, v)}
