"""The paper tables: registry, transcribed published numbers and their source notes.

The registry comes from the papers' records (:mod:`contrastlab.papers`). Each table ``<name>`` has two
files in ``published/``: ``<name>.csv`` with the published numbers, one row per cell (``backbone,
method, task|param, value, ...``; an empty ``value`` is a cell the paper prints as "-"), and
``<name>.yaml`` with the paper, table number, caption, footnotes, how the paper's rows and columns map to
our ``(experiment, backbone, method, task)`` keys, the layout used to render it, and where each row sits
in the paper text (checked by :mod:`contrastlab.tables.verify`).
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrastlab.papers import PUBLISHED_DIR, TABLES, TableSpec, paper_for, reference
from contrastlab.paths import read_yaml

if TYPE_CHECKING:
    import pandas as pd


def paper_backbones(experiment: str) -> list[str]:
    """Backbones that any table of ``experiment`` has in the paper; others are shown as extra rows."""
    tables = [name for name, spec in TABLES.items() if spec.experiment == experiment]
    return list(dict.fromkeys(b for name in tables for b in load_meta(name)["layout"]["backbones"]))


def get_spec(name: str) -> TableSpec:
    """The registered table ``name``; unknown names list the valid ones."""
    try:
        return TABLES[name]
    except KeyError:
        raise ValueError(f"unknown table {name!r}; valid: {', '.join(TABLES)}") from None


@functools.cache
def load_meta(name: str) -> dict[str, Any]:
    """The sidecar ``published/<name>.yaml`` of table ``name``; where its ``paper`` gives no ``reference``,
    the one its paper's record makes (:func:`contrastlab.papers.reference`)."""
    get_spec(name)
    meta = read_yaml(PUBLISHED_DIR / f"{name}.yaml")
    _check_layout(name, meta.get("layout") or {})
    if "reference" not in meta["paper"]:
        meta["paper"]["reference"] = reference(paper_for(name))
    return meta


def _check_layout(name: str, layout: Mapping[str, Any]) -> None:
    """Every backbone and method ``layout`` names has a row in the table's CSV (a swept method its
    ``<method>-<label><value>`` rows): a name without one is a typo, and its row would vanish from the
    rendered table. (A task may have none: a column of ours the paper does not print.) Raises
    ``ValueError`` (one line naming the file, the unknown name and the known ones)."""
    with open(PUBLISHED_DIR / f"{name}.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    label = (layout.get("sweep") or {}).get("label")
    for axis, column in (("backbones", "backbone"), ("methods", "method")):
        known = list(dict.fromkeys(row.get(column) or "" for row in rows))
        if axis == "methods" and label:  # ntxent-bs64 is a point of ntxent
            known = list(dict.fromkeys(m.rsplit(f"-{label}", 1)[0] for m in known))
        if unknown := [n for n in layout.get(axis) or () if n not in known]:
            raise ValueError(
                f"published table {PUBLISHED_DIR / f'{name}.yaml'}: layout.{axis} names "
                f"{', '.join(map(repr, unknown))}, which no row of {name}.csv has (a typo?); known: "
                f"{', '.join(known)}"
            )


def _numbers(values, path: Path, column: str):
    """``values`` (a CSV column as text) as floats, "" as NaN; a cell that is not a finite number raises
    ``ValueError`` naming the file, the row (the file's line) and the column."""
    out = []
    for row, text in enumerate(values, start=2):  # line 1 is the header
        try:
            number = float(text) if text != "" else math.nan
        except ValueError:
            number = math.inf
        if math.isinf(number) or (text != "" and math.isnan(number)):
            raise ValueError(
                f"published table {path}: line {row}, column {column}: {text!r} is not a number; "
                "write the paper's number (empty where it prints none)"
            )
        out.append(number)
    return out


@functools.cache
def _load_published(name: str) -> pd.DataFrame:
    import pandas as pd  # here, so that the registry imports fast (the Snakefile reads it)

    spec = get_spec(name)
    key = "param" if spec.kind == "hparams" else "task"
    path = PUBLISHED_DIR / f"{name}.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df = df.assign(**{column: "" for column in ("improvement", "unit", "mark") if column not in df})
    out = df.rename(columns={key: "key"})[
        ["backbone", "method", "key", "value", "improvement", "unit", "mark"]
    ]
    out = out.assign(**{column: _numbers(df[column], path, column) for column in ("value", "improvement")})
    out["improvement"] = out["improvement"].astype(float)
    if out.duplicated(["backbone", "method", "key"]).any():
        dups = out[out.duplicated(["backbone", "method", "key"], keep=False)]
        raise ValueError(f"{name}: duplicate published cells:\n{dups}")
    return out


def load_published(name: str) -> pd.DataFrame:
    """Published numbers of table ``name``: columns backbone, method, key (task or parameter), value
    (float, NaN where the paper prints "-"), improvement (float or NaN), unit ("" or "pi"), mark
    (footnote mark, e.g. "*")."""
    return _load_published(name).copy()


def sweep_point_names(names: Collection[str], label: str, values: list) -> dict[str, tuple[str, Any]]:
    """Each of ``names`` that is a sweep point ``<method>-<label><value>`` of ``values``: name -> (method,
    value); the table's row of such a point is its method's (``tables.assemble.best_over_sweep``, a card)."""
    return {
        n: (n.removesuffix(f"-{label}{v}"), v) for v in values for n in names if n.endswith(f"-{label}{v}")
    }
