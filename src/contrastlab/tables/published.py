"""The paper tables: registry, transcribed published numbers and their source notes.

The registry comes from the papers' records (:mod:`contrastlab.papers`). Each table ``<name>`` has two
files in ``published/``: ``<name>.csv`` with the published numbers, one row per cell (``backbone,
method, task|param, value, ...``; an empty ``value`` is a cell the paper prints as "-"), and
``<name>.yaml`` with the paper, table number, caption, footnotes, how the paper's rows and columns map to
our ``(experiment, backbone, method, task)`` keys, the layout used to render it, and where each row sits
in the paper text (checked by :mod:`contrastlab.tables.verify`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrastlab.papers import PAPERS, TableSpec, paper_for, reference
from contrastlab.paths import read_yaml

if TYPE_CHECKING:
    import pandas as pd

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"

#: Registry of every table the pipeline can regenerate, in report order: each paper's tables
#: (:data:`contrastlab.papers.PAPERS`), the papers in theirs.
TABLES: dict[str, TableSpec] = {table.name: table for paper in PAPERS for table in paper.tables}


def paper_backbones(experiment: str) -> list[str]:
    """Backbones that any table of ``experiment`` has in the paper; others are shown as extra rows."""
    seen: dict[str, None] = {}
    for spec in TABLES.values():
        if spec.experiment == experiment:
            seen.update(dict.fromkeys(load_meta(spec.name)["layout"]["backbones"]))
    return list(seen)


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
    if "reference" not in meta["paper"]:
        meta["paper"]["reference"] = reference(paper_for(name))
    return meta


@functools.cache
def _load_published(name: str) -> pd.DataFrame:
    import pandas as pd  # here, so that the registry imports fast (the Snakefile reads it)

    spec = get_spec(name)
    key = "param" if spec.kind == "hparams" else "task"
    df = pd.read_csv(PUBLISHED_DIR / f"{name}.csv", dtype=str, keep_default_na=False)
    out = pd.DataFrame(
        {
            "backbone": df["backbone"],
            "method": df["method"],
            "key": df[key],
            "value": pd.to_numeric(df["value"].replace("", None), errors="raise").astype(float),
            "improvement": pd.to_numeric(
                df.get("improvement", pd.Series("", index=df.index)).replace("", None)
            ),
            "unit": df.get("unit", pd.Series("", index=df.index)),
            "mark": df.get("mark", pd.Series("", index=df.index)),
        }
    )
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
