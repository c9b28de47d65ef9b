"""The control: every claim evaluated on the papers' own transcribed numbers, as if they were ours.

A perfect reproduction is one whose numbers equal the paper's. Every claim that rests on a paper table
is evaluated by :func:`~contrastlab.report.claims.evaluate_claim` on metrics built from the transcribed
tables (:func:`published_cells`, :func:`published_metrics`); a claim the paper's own tables fail would
read "not reproduced" for a perfect reproduction, a fault of the claim's encoding, not of the run. A
claim whose sentence those tables do not support says so (``paper_tables``) and is expected *not* to
come out reproduced here. Each cell has the paper's number of runs k, every run at the printed value
(k = 1 gets two identical runs, so there is a noise estimate of zero): the verdicts test the paper's
point contrasts against the claims' relations and margins. Claims on sweeps link only figures and are
not checkable here (:func:`control_results` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from contrastlab.config import Grid
from contrastlab.report.claims import NOT_RUN, ClaimResult, all_claims, evaluate_claim
from contrastlab.senteval.protocol import AVERAGED
from contrastlab.tables.metrics import COLUMNS, PRETRAINED
from contrastlab.tables.published import TABLES, load_meta, load_published
from contrastlab.tables.verdicts import published_runs, runs_assumed

#: Seeds of the fake runs (k of them per cell, at least two).
FIRST_SEED = 42


def published_cells(experiment: str) -> pd.DataFrame:
    """The paper's numbers of ``experiment``'s score tables, one row per (backbone, method, task) with
    its value, runs (k), runs_assumed (:func:`~contrastlab.tables.verdicts.runs_assumed`) and source."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    derived: list[dict[str, Any]] = []
    for name, spec in TABLES.items():
        if spec.experiment != experiment or spec.kind == "hparams":
            continue
        meta = load_meta(name)
        table = load_published(name)[["backbone", "method", "key", "value", "improvement"]]
        over = (meta.get("improvement") or {}).get("over") or {}
        for b, m, k, v, imp in table.itertuples(index=False):
            if pd.isna(v):
                continue
            runs, assumed = published_runs(meta, m), runs_assumed(meta, m)
            rows.setdefault(
                (b, m, k), dict(value=v, runs=runs, runs_assumed=assumed, source=meta["paper"]["table"])
            )
            if m in over and not pd.isna(imp):
                runs, assumed = published_runs(meta, over[m]), runs_assumed(meta, over[m])
                label = f"{meta['paper']['table']} subscript"
                derived.append(
                    dict(key=(b, over[m], k), value=v - imp, runs=runs, runs_assumed=assumed, source=label)
                )
    for row in derived:  # a printed number wins over one derived from a subscript
        rows.setdefault(row.pop("key"), row)
    for b, m in sorted({bmk[:2] for bmk in rows}):
        for avg in ("sts_avg", "tr_avg"):  # a paper's per-task numbers are test scores: no dev-acc mean
            parts = [rows.get((b, m, t)) for t in AVERAGED[avg]]
            if (b, m, avg) in rows or not all(parts):
                continue
            rows[(b, m, avg)] = dict(
                value=sum(p["value"] for p in parts) / len(parts),
                runs=min(p["runs"] for p in parts),
                runs_assumed=any(p["runs_assumed"] for p in parts),
                source=f"{parts[0]['source'].removesuffix(' subscript')} per-task mean",
            )
    return pd.DataFrame(
        [dict(backbone=b, method=m, task=k, **r) for (b, m, k), r in rows.items()],
        columns=["backbone", "method", "task", "value", "runs", "runs_assumed", "source"],
    )


def published_metrics(experiment: str) -> pd.DataFrame:
    """:func:`published_cells` as a metrics frame: each cell's max(k, 2) runs at the published value,
    seeds from :data:`FIRST_SEED`; a "Pretrained" row one deterministic evaluation (seed NA)."""
    rows = []
    for b, m, t, v, k in published_cells(experiment)[
        ["backbone", "method", "task", "value", "runs"]
    ].itertuples(index=False):
        if m == PRETRAINED:
            rows.append((PRETRAINED, b, m, None, t, v))
            continue
        rows += [(experiment, b, m, FIRST_SEED + i, t, v) for i in range(max(int(k), 2))]
    return pd.DataFrame(rows, columns=COLUMNS).astype({"seed": "Int64", "score": float})


def control_grid(grid: Grid, experiment: str) -> Grid:
    """The control's grid of ``experiment``: ``grid``'s config with the experiment's seeds set to the
    fake runs' and, where its table reports the best point of a sweep, without the sweep (``@best`` is
    then the printed number)."""
    seeds = range(FIRST_SEED, FIRST_SEED + max(2, int(published_cells(experiment)["runs"].max())))
    best_over_sweep = any(
        load_meta(n)["layout"].get("best_over_sweep") for n, s in TABLES.items() if s.experiment == experiment
    )
    return grid.with_experiment(experiment, seeds=seeds, drop=("sweep",) if best_over_sweep else ())


@dataclass
class ControlResult:
    """A claim on the paper's own numbers: its result, or why it is not checkable there."""

    claim: dict[str, Any]
    result: ClaimResult | None
    why_not: str = ""


def checkable(claim: dict[str, Any]) -> bool:
    """Whether the claim rests on a transcribed table, or on numbers its paper prints in the text
    (``text_values``; a figure-only claim has no published numbers)."""
    return bool(claim.get("text_values")) or any(link in TABLES for link in claim.get("links") or [])


def text_cells(claim: dict[str, Any]) -> dict[tuple[str, str, str], float]:
    """(backbone, method, task) -> value of the numbers a figure claim's paper prints in its text
    (``text_values: {term: {value: v, read: how}}``, a term as the claim's parts name it, on the
    claim's task and backbones). The control has no sweep where its table prints only the best point
    (:func:`control_grid`), so a sweep position (``infonce@max``) is its method's cell there."""
    out = {}
    for term, spec in (claim.get("text_values") or {}).items():
        method, _, task = term.partition("/")
        for backbone in claim["backbones"]:
            out[(backbone, method.split("@", 1)[0], task or claim["task"])] = float(spec["value"])
    return out


def claim_metrics(claim: dict[str, Any], experiment: str) -> pd.DataFrame:
    """:func:`published_metrics` of the claim's experiment with its ``text_values`` (:func:`text_cells`)
    in place of the tables' numbers for those cells."""
    frame = published_metrics(experiment)
    for (b, m, t), v in text_cells(claim).items():
        frame.loc[(frame["backbone"] == b) & (frame["method"] == m) & (frame["task"] == t), "score"] = v
    return frame


def control_results(grid: Grid) -> list[ControlResult]:
    """Every claim (:func:`~contrastlab.report.claims.all_claims`) evaluated on its paper's own numbers,
    or the reason it cannot be."""
    out, controls = [], {}
    for claim in all_claims():
        name = claim["experiment"]
        if not checkable(claim):
            out.append(ControlResult(claim, None, "links only figures: no transcribed numbers"))
            continue
        if name not in grid.every_experiment:
            out.append(ControlResult(claim, None, f"experiment {name} not in the config"))
            continue
        # the control's own config (the fake runs' seeds, no best-of-sweep): a grid of its own
        if name not in controls:
            controls[name] = control_grid(grid, name)
        result = evaluate_claim(claim, claim_metrics(claim, name), controls[name])
        why = "; ".join(
            f"{p.backbone}: no published {', '.join(p.missing)}" for p in result.parts if p.missing
        )
        out.append(ControlResult(claim, result, why if result.verdict == NOT_RUN else ""))
    return out
