"""Two runs side by side (``make compare A=<results> B=<results>``): the check a second lab runs to say
"we reproduced the reproduction".

Reads what each run's tables job wrote: ``tables/scores.csv`` (:mod:`.scores`, one row per cell, seed
and task) and ``tables/claims.csv`` (:func:`write_claims`, one row per claim). Per table cell (experiment,
backbone, method, task) the two means, their difference B − A and whether the seeds' noise explains it;
per claim the two verdicts.

**Noise.** The tables' statistics: where cells have two seeds or more, the seed standard deviation pooled
over the cells of the same experiment and task in both runs (degrees of freedom Σ(n − 1)), and the
difference's standard error σ·√(1/n_A + 1/n_B); where every cell has one seed (the demo), the
differences themselves are the noise: σ_d² = the mean d² of the other cells of the same task and
backbone, every experiment together (the cell left out of its own noise, so that a changed cell cannot
hide itself; at least 6 cells). The interval is Student's t at the project's level, Bonferroni-corrected
over every cell compared: across hundreds of cells, one flagged by chance alone is unlikely, so a
flagged cell is a change, not a draw. Two equal numbers are within noise whatever the estimate.
A cell is **within noise** inside it, **differs** outside it, **no noise estimate** without one, and
**only in A** / **only in B** where one run lacks it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from contrastlab.paths import write_text
from contrastlab.stats import LEVEL

CLAIMS_NAME = "claims.csv"
CELL = ["experiment", "backbone", "method", "task"]
WITHIN, DIFFERS, NO_NOISE, ONLY_A, ONLY_B = (
    "within noise",
    "differs",
    "no noise estimate",
    "only in A",
    "only in B",
)
#: The fewest cells whose differences estimate the noise of one-seed cells.
MIN_SPREAD_CELLS = 6


def write_claims(results, out_dir: Path) -> Path:
    """``out_dir / claims.csv``: per claim (``results``, :func:`~.claims.evaluate_claims`) its id, paper
    file, verdict and the parts run of all; what :func:`compare_runs` reads."""
    rows = [
        {
            "id": r.claim["id"],
            "experiment": r.claim.get("experiment", ""),
            "verdict": r.verdict,
            "parts_run": r.parts_run,
            "parts": len(r.parts),
        }
        for r in results
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


def cell_table(a: pd.DataFrame, b: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """Per table cell of the scores ``a`` and ``b`` (:data:`~.scores.SCORE_COLUMNS`): mean_a, mean_b,
    n_a, n_b, diff (B − A), half_width, noise (how it was estimated) and verdict (module docstring)."""
    frames = []
    for frame, tag in ((a, "a"), (b, "b")):
        scores = frame.dropna(subset=["score"])
        grouped = scores.groupby(CELL, dropna=False)["score"]
        frames.append(grouped.agg(**{f"mean_{tag}": "mean", f"std_{tag}": "std", f"n_{tag}": "count"}))
    cells = frames[0].join(frames[1], how="outer").reset_index()
    cells["diff"] = cells["mean_b"] - cells["mean_a"]
    both = cells["diff"].notna()
    m = int(both.sum())
    cells["half_width"], cells["noise"] = math.nan, ""
    for _, index in cells[both].groupby(["experiment", "backbone", "task"]).groups.items():
        group = cells.loc[index]
        dof = (group["n_a"] - 1).clip(lower=0).sum() + (group["n_b"] - 1).clip(lower=0).sum()
        if dof > 0:
            ss = ((group["n_a"] - 1) * group["std_a"].fillna(0) ** 2).sum() + (
                (group["n_b"] - 1) * group["std_b"].fillna(0) ** 2
            ).sum()
            sigma = math.sqrt(ss / dof)
            q = float(sps.t.ppf(1 - (1 - level) / (2 * m), dof))
            cells.loc[index, "half_width"] = q * sigma * np.sqrt(1 / group["n_a"] + 1 / group["n_b"])
            cells.loc[index, "noise"] = f"seeds pooled over {len(group)} cells (df {int(dof)})"
        else:  # one seed per cell: the differences of the task's other cells on the backbone are the noise
            first = group.iloc[0]
            spread = cells[both & (cells["task"] == first["task"]) & (cells["backbone"] == first["backbone"])]
            if len(spread) >= MIN_SPREAD_CELLS:
                total = float((spread["diff"] ** 2).sum())
                # σ_d from len(spread) - 1 other cells: Student's t with as many degrees of freedom
                q = float(sps.t.ppf(1 - (1 - level) / (2 * m), len(spread) - 1))
                for i in index:  # the cell left out of its own noise: a changed cell cannot hide itself
                    others = (total - float(cells.at[i, "diff"]) ** 2) / (len(spread) - 1)
                    cells.at[i, "half_width"] = q * math.sqrt(max(others, 0.0))
                cells.loc[index, "noise"] = f"one seed per cell: {len(spread) - 1} other cells of the task"
    equal = cells["diff"] == 0  # the same number twice: no noise estimate needed
    verdict = np.where((cells["diff"].abs() <= cells["half_width"]) | equal, WITHIN, DIFFERS)
    verdict = np.where(cells["half_width"].isna() & ~equal, NO_NOISE, verdict)
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
    """Write the comparison of the results folders ``a`` and ``b`` as Markdown to ``out`` (default
    ``<b>/compare.md``) and the per-cell table beside it (``.csv``); returns the Markdown's path."""
    a, b = Path(a), Path(b)
    cells = cell_table(_read(a, "scores.csv"), _read(b, "scores.csv"))
    claims = claim_table(_read(a, CLAIMS_NAME), _read(b, CLAIMS_NAME))
    out = Path(out) if out is not None else b / "compare.md"
    counts = cells["verdict"].value_counts()
    lines = [
        f"# {a} (A) against {b} (B)",
        "",
        f"{len(cells)} table cells: "
        + ", ".join(f"{counts.get(v, 0)} {v}" for v in (WITHIN, DIFFERS, NO_NOISE, ONLY_A, ONLY_B))
        + f". {int((~claims['same']).sum())} of {len(claims)} claims change their verdict.",
        "",
        f"A cell differs when B − A lies outside the seeds' noise at {LEVEL:.0%}, Bonferroni-corrected over "
        f"the {int(cells['diff'].notna().sum())} cells both runs have (see contrastlab.report.compare).",
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
    lines += ["", "## Claims", "", "| claim | A | B | same |", "|---|---|---|---|"]
    for r in claims.itertuples():
        lines.append(f"| {r.id} | {r.verdict_a} | {r.verdict_b} | {'yes' if r.same else '**no**'} |")
    lines += ["", f"Every cell: [{out.with_suffix('.csv').name}]({out.with_suffix('.csv').name}).", ""]
    write_text(out.with_suffix(".csv"), cells.to_csv(index=False, lineterminator="\n"))
    write_text(out, "\n".join(lines))
    return out
