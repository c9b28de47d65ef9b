"""The paper tables: registry, transcribed published numbers and their source notes.

Each table ``<name>`` has two files in ``published/``: ``<name>.csv`` with the published numbers, one
row per cell (``backbone, method, task|param, value, ...``; an empty ``value`` is a cell the paper
prints as "-"), and ``<name>.yaml`` with the paper, table number, caption, footnotes, how the paper's
rows and columns map to our ``(experiment, backbone, method, task)`` keys, the layout used to render
it, and where each row sits in the paper text (checked by :mod:`contrastlab.tables.verify`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import pandas as pd

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"

#: Kinds of table: measured scores per (method, task); ablation steps of one score; hyperparameters.
KINDS = ("scores", "steps", "hparams")


@dataclass(frozen=True)
class TableSpec:
    """One paper table: its registry name, the config experiment it belongs to and its kind."""

    name: str
    experiment: str
    kind: str
    title: str

    @property
    def meta(self) -> dict[str, Any]:
        """The sidecar YAML (paper, caption, footnotes, mapping, layout, labels, transcription)."""
        return load_meta(self.name)

    @property
    def published(self) -> pd.DataFrame:
        """The transcribed numbers (see :func:`load_published`)."""
        return load_published(self.name)


#: Registry of every table the pipeline can regenerate, in report order.
TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec("nie2023_table1", "nie2023", "scores", "Nie et al. 2023, Table 1: STS.Avg and TR.Avg"),
        TableSpec("nie2023_table2", "nie2023", "hparams", "Nie et al. 2023, Table 2: hyperparameters"),
        TableSpec("li2024_table3", "li2024", "scores", "Li et al. 2024, Table 3: STS tasks"),
        TableSpec("li2024_table4", "li2024", "scores", "Li et al. 2024, Table 4: transfer tasks"),
        TableSpec("li2024_table5", "li2024", "steps", "Li et al. 2024, Table 5: original -> +GD -> +W -> +R"),
        TableSpec(
            "li2024_table6", "li2024", "hparams", "Li et al. 2024, Table 6: hyperparameters, BERT-base"
        ),
        TableSpec(
            "li2024_table7", "li2024", "hparams", "Li et al. 2024, Table 7: hyperparameters, RoBERTa-base"
        ),
        TableSpec("macl_table3", "macl", "scores", "Huang et al. 2023 (MACL), Table 3: RoBERTa-base"),
        TableSpec("macl_tableB4", "macl", "scores", "Huang et al. 2023 (MACL), Table B.4: BERT-base"),
        TableSpec(
            "macl_table9",
            "macl_cifar10",
            "scores",
            "Huang et al. 2023 (MACL), Table 9 / B.3: CIFAR-10, linear / kNN top-1",
        ),
        TableSpec(
            "oar_table3", "oar_cifar10", "scores", "OAR 2024, Table 3: CIFAR-10 FFN fine-tuning, +- OAR"
        ),
        TableSpec(
            "oar_table4", "oar_cifar100", "scores", "OAR 2024, Table 4: CIFAR-100 FFN fine-tuning, +- OAR"
        ),
    )
}


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
    """The sidecar ``published/<name>.yaml`` of table ``name``."""
    get_spec(name)
    with open(PUBLISHED_DIR / f"{name}.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)


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
