"""Two runs side by side (``make compare A=<results> B=<results>``): the check a second lab runs to say
"we reproduced the reproduction".

Reads each run's ``tables/scores.csv`` (:mod:`.scores`) and ``tables/claims.csv`` (:func:`write_claims`):
per table cell the two means, B − A and whether seed noise explains it; per claim the two verdicts.
The noise is the cells' seed std pooled per experiment and task over both runs (se σ·√(1/n_A + 1/n_B)),
or, with one seed per cell (the demo), the mean d² of the task's and backbone's other cells (the cell
left out of its own noise; at least 6 cells). Student's t at the project's level, Bonferroni over the m
cells tested, so a flagged cell is a change, not a draw: **within noise**, **differs**, **no noise
estimate**, **only in A** / **only in B**. A searched cell whose two searches chose different settings
is **different setting**: not tested and left out of the others' noise.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from contrastlab.paths import write_text
from contrastlab.search import searched_method
from contrastlab.stats import LEVEL

CLAIMS_NAME = "claims.csv"
CELL = ["experiment", "backbone", "method", "task"]
WITHIN, DIFFERS, NO_NOISE, ONLY_A, ONLY_B, SETTING = (
    "within noise",
    "differs",
    "no noise estimate",
    "only in A",
    "only in B",
    "different setting",
)
VERDICTS = (WITHIN, DIFFERS, SETTING, NO_NOISE, ONLY_A, ONLY_B)
#: The fewest cells whose differences estimate the noise of one-seed cells.
MIN_SPREAD_CELLS = 6


def write_claims(results, out_dir: Path) -> Path:
    """``out_dir / claims.csv``: per claim (``results``, :func:`~.claims.evaluate_claims`) its id, paper
    file, verdict and the parts run of all; what :func:`compare_runs` reads."""
    rows = [
        (r.claim["id"], r.claim.get("experiment", ""), r.verdict, r.parts_run, len(r.parts)) for r in results
    ]
    frame = pd.DataFrame(rows, columns=["id", "experiment", "verdict", "parts_run", "parts"])
    path = Path(out_dir) / CLAIMS_NAME
    write_text(path, frame.to_csv(index=False, lineterminator="\n"))
    return path


def _read(results: Path, name: str) -> pd.DataFrame:
    path = results / "tables" / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: run the tables job of that run (snakemake tables --configfile <its preset>)"
        )
    return pd.read_csv(path)


def search_choices(results: Path) -> dict[tuple[str, str, str], dict]:
    """Per searched cell (experiment, backbone, ``<method>~searched``) of the run ``results``: the
    searched settings its winner trains with, every stage's winning point's grid values in stage order
    (a later stage keeps the earlier winner's values and sets its own axes)."""
    choices: dict[tuple[str, str, str], dict] = {}
    for path in sorted((results / "search").glob("*/*/*/stage*.json"), key=lambda p: (p.parent, p.stem)):
        experiment, backbone, method = path.parts[-4:-1]
        try:
            selection = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path} is not JSON ({err.msg}, line {err.lineno}): run that run's search_select job again"
            ) from err
        point = next((p for p in selection.get("points", []) if p.get("name") == selection.get("winner")), {})
        chosen = choices.setdefault((experiment, backbone, searched_method(method)), {})
        chosen.update(point.get("grid") or {})
        chosen.update(point.get("around") or {})
    return choices


def _setting(values: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())


def cell_table(
    a: pd.DataFrame, b: pd.DataFrame, level: float = LEVEL, choices: tuple[dict, dict] = ({}, {})
) -> pd.DataFrame:
    """Per table cell of the scores ``a`` and ``b``: mean_a, mean_b, n_a, n_b, diff (B − A), half_width,
    noise (how it was estimated), setting (differing search choices, from ``choices``) and verdict."""
    frames = []
    for frame, tag in ((a, "a"), (b, "b")):
        scores = frame.dropna(subset=["score"])
        grouped = scores.groupby(CELL, dropna=False)["score"]
        frames.append(grouped.agg(**{f"mean_{tag}": "mean", f"std_{tag}": "std", f"n_{tag}": "count"}))
    cells = frames[0].join(frames[1], how="outer").reset_index()
    cells["diff"] = cells["mean_b"] - cells["mean_a"]
    cells["setting"] = ""
    for i, key in enumerate(zip(cells["experiment"], cells["backbone"], cells["method"], strict=True)):
        in_a, in_b = choices[0].get(key), choices[1].get(key)
        if in_a is not None and in_b is not None and in_a != in_b:
            cells.at[i, "setting"] = f"the search chose {_setting(in_a)} in A, {_setting(in_b)} in B"
    both = cells["diff"].notna() & (cells["setting"] == "")
    se, dof = pd.Series(math.nan, index=cells.index), pd.Series(math.nan, index=cells.index)
    cells["noise"] = ""
    for _, index in cells[both].groupby(["experiment", "backbone", "task"]).groups.items():
        group = cells.loc[index]
        df = sum((group[f"n_{run}"] - 1).clip(lower=0).sum() for run in "ab")
        if df > 0:
            ss = sum(((group[f"n_{run}"] - 1) * group[f"std_{run}"].fillna(0) ** 2).sum() for run in "ab")
            se[index] = math.sqrt(ss / df) * np.sqrt(1 / group["n_a"] + 1 / group["n_b"])
            dof[index] = df
            cells.loc[index, "noise"] = f"seeds pooled over {len(group)} cells (df {int(df)})"
        else:  # one seed per cell: the differences of the task's other cells on the backbone are the noise
            first = group.iloc[0]
            spread = cells[both & (cells["task"] == first["task"]) & (cells["backbone"] == first["backbone"])]
            if len(spread) >= MIN_SPREAD_CELLS:
                total = float((spread["diff"] ** 2).sum())
                for i in index:  # the cell left out of its own noise: a changed cell cannot hide itself
                    se[i] = math.sqrt(max((total - float(cells.at[i, "diff"]) ** 2) / (len(spread) - 1), 0.0))
                dof[index] = len(spread) - 1  # σ_d from len(spread) - 1 other cells
                cells.loc[index, "noise"] = f"one seed per cell: {len(spread) - 1} other cells of the task"
    tested = int(se.notna().sum())
    cells.attrs["tested"] = tested
    q = sps.t.ppf(1 - (1 - level) / (2 * max(tested, 1)), dof)
    cells["half_width"] = q * se
    equal = cells["diff"] == 0  # the same number twice: no noise estimate needed
    verdict = np.where((cells["diff"].abs() <= cells["half_width"]) | equal, WITHIN, DIFFERS)
    verdict = np.where(cells["half_width"].isna() & ~equal, NO_NOISE, verdict)
    verdict = np.where(cells["setting"] != "", SETTING, verdict)
    verdict = np.where(cells["mean_a"].isna(), ONLY_B, np.where(cells["mean_b"].isna(), ONLY_A, verdict))
    cells["verdict"] = verdict
    return cells.drop(columns=["std_a", "std_b"])


def claim_table(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per claim id: verdict_a, verdict_b and whether they agree ("—" where a run has no such claim)."""
    merged = a[["id", "verdict"]].merge(b[["id", "verdict"]], on="id", how="outer", suffixes=("_a", "_b"))
    merged = merged.fillna("—")
    merged["same"] = merged["verdict_a"] == merged["verdict_b"]
    return merged


def _fmt(x: float) -> str:
    return "" if pd.isna(x) else f"{x:.2f}"


def compare_runs(a: str | os.PathLike, b: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the comparison of the results folders ``a`` and ``b`` as Markdown to ``out`` (a file, or a
    folder for its ``compare.md``; default ``b``) and the per-cell table beside it (``.csv``); returns the
    Markdown's path."""
    if "" in (os.fspath(a), os.fspath(b)):  # `make compare` without A= or B=: not the working directory
        raise ValueError("compare needs two results folders: make compare A=<results> B=<results>")
    a, b = Path(a), Path(b)
    for run in (a, b):  # a typo in A= or B=: no tables job makes it
        if not run.is_dir():
            raise FileNotFoundError(f"{run} is not a folder: name a run's results folder (e.g. results/demo)")
    cells = cell_table(
        _read(a, "scores.csv"), _read(b, "scores.csv"), choices=(search_choices(a), search_choices(b))
    )
    claims = claim_table(_read(a, CLAIMS_NAME), _read(b, CLAIMS_NAME))
    out = Path(b if out is None else out)
    out = out / "compare.md" if out.is_dir() else out
    counts = cells["verdict"].value_counts()
    tested = cells.attrs["tested"]
    lines = [
        f"# {a} (A) against {b} (B)",
        "",
        f"{len(cells)} table cells: "
        + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
        + f". {int((~claims['same']).sum())} of {len(claims)} claims change their verdict.",
        "",
        f"B − A tested against the seeds' noise in {tested} cells, decided over the family: Bonferroni, "
        f"each cell at {1 - (1 - LEVEL) / max(tested, 1):.4%} so that all {tested} together are at "
        f"{LEVEL:.0%} (see contrastlab.report.compare). A searched cell whose search chose another "
        "setting in B is a different setting, not tested.",
        "",
        "## Cells that differ",
        "",
    ]
    flagged = cells[cells["verdict"] == DIFFERS]
    if flagged.empty:
        lines.append("None: the seeds' noise explains every difference.")
    else:
        lines += [
            "| experiment | backbone | method | task | A | B | B − A | ± | noise |",
            "|---|---|---|---|---:|---:|---:|---:|---|",
        ]
        for r in flagged.itertuples():
            lines.append(
                f"| {r.experiment} | {r.backbone} | {r.method} | {r.task} | {_fmt(r.mean_a)} | "
                f"{_fmt(r.mean_b)} | {r.diff:+.2f} | {_fmt(r.half_width)} | {r.noise} |"
            )
    other = cells[cells["verdict"] == SETTING].groupby(["experiment", "backbone", "method", "setting"])
    if len(other):
        lines += ["", "## Different setting", ""]
        for (experiment, backbone, method, setting), group in other:
            lines.append(f"- {experiment} / {backbone} / {method} ({len(group)} cells): {setting}.")
    lines += ["", "## Claims", "", "| claim | A | B | same |", "|---|---|---|---|"]
    for r in claims.itertuples():
        lines.append(f"| {r.id} | {r.verdict_a} | {r.verdict_b} | {'yes' if r.same else '**no**'} |")
    lines += ["", f"Every cell: [{out.with_suffix('.csv').name}]({out.with_suffix('.csv').name}).", ""]
    write_text(out.with_suffix(".csv"), cells.to_csv(index=False, lineterminator="\n"))
    write_text(out, "\n".join(lines))
    return out
