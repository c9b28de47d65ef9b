"""Claims read off a figure's numbers: relation ``figure_values`` (:mod:`contrastlab.report.claims`).

Some headline sentences rest on a quantity only a regenerated figure's CSV holds (OAR Table 2's
synthetic study, Li et al.'s conjecture figures, Nie et al.'s d_ij across training). A part reads the
rows a selection names from ``figures/<csv>.csv``, reduces them (``at``: every, last, first, growth,
mean, min, max) and compares the value with its bound (``above``, ``below``, ``at_least``,
``at_most``). One run per point is a reading, not a test: reproduced if the bound is met, not reproduced
if not, not run if the CSV or its rows are missing or NaN; a part with ``error:`` (Monte-Carlo standard
error) or ``noise: seeds`` is undecided where that noise could flip it. The keys in full:
``docs/claims.md``, "Claims read off a figure".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from contrastlab.config import Grid
from contrastlab.report.parts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, UNDECIDED, PartResult, decide
from contrastlab.stats import LEVEL, t_quantile

RELATION = "figure_values"
AGGREGATES = ("every", "last", "first", "growth", "mean", "min", "max")
#: How a claim's parts combine on each backbone: all must hold (default) or any one suffices.
COMBINE = ("all", "any")
#: Bound keys and their tests.
BOUNDS = {
    "above": (">", lambda v, b: v > b),
    "below": ("<", lambda v, b: v < b),
    "at_least": ("≥", lambda v, b: v >= b),
    "at_most": ("≤", lambda v, b: v <= b),
}


def part_terms(part: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """A figure part's (coefficient, rows) terms: its ``terms``, else its ``rows`` with coefficient 1."""
    if "terms" in part:
        return [(float(c), dict(rows)) for c, rows in part["terms"]]
    return [(1.0, dict(part.get("rows") or {}))]


def check_figure_values(claim: dict[str, Any], name: str) -> None:
    """Raise ``ValueError`` unless every part of a ``figure_values`` claim is well-formed (the module
    docstring's keys; each message says what is wrong)."""
    for key in ("margin", "at_least", "noninferiority_margin", "scale"):
        if key in claim:
            raise ValueError(f"{name}: {key} is not for relation {RELATION!r} (each part states its bound)")
    if claim.get("combine", "all") not in COMBINE:
        raise ValueError(f"{name}: combine must be one of {COMBINE}, got {claim.get('combine')!r}")
    for part in claim.get("parts") or []:
        if not isinstance(part, dict) or not isinstance(part.get("csv"), str) or not part.get("column"):
            raise ValueError(f"{name}: a {RELATION} part is {{csv: ..., column: ..., ...}}, got {part!r}")
        at = part.get("at", "every")
        if at not in AGGREGATES:
            raise ValueError(f"{name}: at must be one of {AGGREGATES}, got {part.get('at')!r}")
        if ("rows" in part) == ("terms" in part):
            raise ValueError(f"{name}: a {RELATION} part has rows or terms (one of them), got {part!r}")
        try:
            terms = part_terms(part)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name}: terms are [coefficient, {{column: value}}], got {part!r}") from err
        if at == "every" and [c for c, _ in terms] != [1.0]:
            raise ValueError(f"{name}: at 'every' takes one selection (rows), got {part!r}")
        if "error" in part and (not isinstance(part["error"], str) or at not in ("every", "mean")):
            raise ValueError(f"{name}: error names a column and goes with at 'every' or 'mean', got {part!r}")
        if part.get("noise", "seeds") != "seeds" or (
            "noise" in part and (at != "mean" or "terms" in part or part.get("weights"))
        ):  # its t-interval is over one selection's rows, one per seed
            raise ValueError(f"{name}: noise is 'seeds', with at 'mean' of rows, unweighted; got {part!r}")
        if "error" in part and part.get("weights"):
            raise ValueError(f"{name}: error takes an unweighted mean, got {part!r}")
        bounds = [k for k in BOUNDS if k in part]
        if len(bounds) != 1 or isinstance(part[bounds[0]], bool):
            raise ValueError(f"{name}: a {RELATION} part states one bound of {tuple(BOUNDS)}, got {part!r}")
        float(part[bounds[0]])


def _select(frame: pd.DataFrame, rows: dict[str, Any]) -> pd.DataFrame:
    keep = pd.Series(True, index=frame.index)
    for column, wanted in rows.items():
        if column not in frame.columns:
            return frame.iloc[0:0]
        values = frame[column]
        if isinstance(wanted, list | tuple) and len(wanted) == 2:  # [low, high], ends included
            numeric = pd.to_numeric(values, errors="coerce")
            keep &= (numeric >= float(wanted[0])) & (numeric <= float(wanted[1]))
        elif isinstance(wanted, bool):  # a CSV's True/False (read as bool or as text)
            keep &= values.astype(str).str.lower() == str(wanted).lower()
        elif isinstance(wanted, int | float):
            numeric = pd.to_numeric(values, errors="coerce")
            keep &= np.isclose(numeric, float(wanted), rtol=1e-9, atol=0.0)
        else:
            keep &= values.astype(str) == str(wanted)
    return frame[keep]


def _value(rows: pd.DataFrame, part: dict[str, Any]) -> float:
    """One number from a selection's rows (``at``: last, first, mean, min, max)."""
    column, at = part["column"], part.get("at", "every")
    values = pd.to_numeric(rows[column], errors="coerce")
    if at in ("last", "first", "growth"):  # the mean of the rows at the largest / smallest `by` (seeds)
        order = pd.to_numeric(rows[part.get("by", "step")], errors="coerce")
        last, first = float(values[order == order.max()].mean()), float(values[order == order.min()].mean())
        return {"last": last, "first": first, "growth": last - first}[at]
    if at == "mean" and part.get("weights"):
        weights = pd.to_numeric(rows[part["weights"]], errors="coerce")
        ok = values.notna() & weights.notna()
        total = float(weights[ok].sum())
        return float((values[ok] * weights[ok]).sum() / total) if total > 0 else math.nan
    return float(getattr(values, at)())


def part_label(part: dict[str, Any]) -> str:
    """How the numbers name a part, e.g. "li2024_fig8b: every value of {method: baseline, key: ratio.met}"."""

    def sel(rows: dict[str, Any]) -> str:
        return "{" + ", ".join(f"{k}: {v}" for k, v in rows.items()) + "}"

    at, column = part.get("at", "every"), part["column"]
    how = f"{at} {column}" + (f" (weights {part['weights']})" if part.get("weights") else "")
    terms = part_terms(part)
    if len(terms) == 1 and terms[0][0] == 1.0:
        return f"{part['csv']}: {how} of {sel(terms[0][1])}"
    text = "".join(
        f"{(' − ' if c < 0 else ' + ') if i else ('−' if c < 0 else '')}"
        f"{'' if abs(c) == 1 else f'{abs(c):g}·'}{sel(rows)}"
        for i, (c, rows) in enumerate(terms)
    )
    return f"{part['csv']}: {how} of {text}"


def bound_of(part: dict[str, Any]) -> tuple[str, str, float]:
    """(key, symbol, value) of the part's bound."""
    key = next(k for k in BOUNDS if k in part)
    return key, BOUNDS[key][0], float(part[key])


def figure_parts(claim: dict[str, Any], grid: Grid) -> list[PartResult]:
    """Every part on every backbone of the claim, read from the CSVs under ``grid``'s results folder (not
    run when the config has neither the claim's ``experiment`` nor a top-level block of that name).
    ``diff`` is the part's value (for ``every``, the row farthest on the wrong side of the bound, else the
    nearest), ``seeds`` the rows read; no interval (``half_width`` NaN, ``df`` 0)."""
    name = str(claim.get("experiment"))
    # the figure is the config's: an experiment of it, or a top-level study block (oar_synthetic)
    exp = grid.experiment(name)
    configured = exp.has_study
    root = Path(grid.results.figures) if grid.options.names_results and configured else None
    frames: dict[str, pd.DataFrame | None] = {}
    parts = []
    coarser, noted = _coarser(grid), False
    for backbone in claim["backbones"]:
        for part in claim["parts"]:
            result = PartResult(backbone, {part_label(part): 1.0}, NOT_RUN, task=str(part["column"]))
            parts.append(result)
            csv = part["csv"]
            if csv not in frames:
                path = root / f"{csv}.csv" if root is not None else None
                frames[csv] = pd.read_csv(path) if path is not None and path.is_file() else None
            frame = frames[csv]
            if frame is None:
                result.missing = [f"figures/{csv}.csv" if configured else f"{name} in the config"]
                continue
            _read_part(result, part, frame, exp.ours_for.get(backbone), any_level(claim))
            if part.get("error") and coarser and result.status != NOT_RUN and not noted:
                result.terms = {f"{next(iter(result.terms))} [{coarser}]": 1.0}  # said once per claim
                noted = True
    return parts


#: The size of Li et al.'s simulations (§3.1: 100 values per axis, 1,000 batches per pair).
PAPER_SIMULATION = {"points": 100, "batches": 1000}


def _coarser(grid: Grid) -> str:
    """How the config's simulated figures (``analytic_figures``) fall short of the paper's size, e.g.
    "coarser than the paper: 40 x 40 pairs, 200 batches (paper 100 x 100, 1,000)"; "" at full size."""
    size = {**PAPER_SIMULATION, **(grid.config.get("analytic_figures") or {})}
    if all(size[k] >= v for k, v in PAPER_SIMULATION.items()):
        return ""
    paper = PAPER_SIMULATION
    return (
        f"coarser than the paper: {size['points']} x {size['points']} pairs, {size['batches']:,} batches "
        f"(paper {paper['points']} x {paper['points']}, {paper['batches']:,})"
    )


def any_level(claim: dict[str, Any]) -> float:
    """The level of each part's noise interval: :data:`LEVEL`, Bonferroni-corrected over the parts of a
    ``combine: any`` claim (one part suffices: "reproduced" is a union over them), and over every part on
    every backbone of one with ``error`` parts (a verdict is a union over their rows; mc_z: each part's)."""
    if any("error" in part for part in claim["parts"]):
        return 1 - (1 - LEVEL) / (len(claim["parts"]) * len(claim["backbones"]))
    return 1 - (1 - LEVEL) / len(claim["parts"]) if claim.get("combine") == "any" else LEVEL


def _read_part(
    result: PartResult, part: dict[str, Any], frame: pd.DataFrame, stand_in: str | None, level: float = LEVEL
) -> None:
    """Read one part off its figure's rows (the claim's backbone's, else its stand-in's, where the CSV has
    a ``backbone`` column) into ``result``: its value against its bound at ``level``, or what is missing."""
    csv = part["csv"]
    if "backbone" in frame.columns:
        names = frame["backbone"].astype(str)
        own = names == result.backbone
        frame = frame[own if own.any() else names == stand_in]
    key, _, bound = bound_of(part)
    meets = BOUNDS[key][1]
    selections = [(c, _select(frame, rows)) for c, rows in part_terms(part)]
    empty = [rows for (_, rows), (_, sel) in zip(part_terms(part), selections, strict=True) if sel.empty]
    if part["column"] not in frame.columns:
        result.missing = [f"column {part['column']} of figures/{csv}.csv"]
        return
    if empty:
        result.missing = [f"rows {r} of figures/{csv}.csv" for r in empty]
        return
    if part.get("error") and part["error"] not in frame.columns:
        result.missing = [f"column {part['error']} of figures/{csv}.csv"]
        return
    sign = 1.0 if key in ("above", "at_least") else -1.0
    if part.get("at", "every") == "every":
        _read_every_row(result, part, selections[0][1], bound, sign, level)
        return
    value = sum(c * _value(sel, part) for c, sel in selections)
    result.seeds = min(len(sel) for _, sel in selections)
    if math.isnan(value):
        result.missing = [f"a number in figures/{csv}.csv"]
        return
    result.diff = value
    result.status = REPRODUCED if meets(value, bound) else NOT_REPRODUCED
    if part.get("noise") == "seeds":  # one row per seed: a t-interval over them, as the tables' cells
        seeds = pd.to_numeric(selections[0][1][part["column"]], errors="coerce").dropna()
        n = len(seeds)
        result.df = n - 1
        result.half_width = (
            float(t_quantile(n - 1, level) * seeds.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        )
        result.status = decide(sign * (value - bound), result.half_width)
    if part.get("error"):  # the value's standard error: sqrt(Σ c² Σ se² / n²) over its selections' rows
        errors = [
            (c * c, pd.to_numeric(s[part["error"]], errors="coerce").fillna(math.inf)) for c, s in selections
        ]
        se = math.sqrt(sum(cc * float((e**2).sum()) / max(len(e), 1) ** 2 for cc, e in errors))
        margin = np.array([sign * (value - bound)])
        result.half_width, result.status = _mc_decided(margin, np.array([se]), level)


def _read_every_row(
    result: PartResult, part: dict[str, Any], rows: pd.DataFrame, bound: float, sign: float, level: float
) -> None:
    """A part decided on every selected row (``at: every``): how many rows meet the bound, the worst
    row's value, and with an ``error`` column :func:`_mc_decided`'s verdict."""
    label, csv = part_label(part), part["csv"]
    meets = BOUNDS[bound_of(part)[0]][1]
    values = pd.to_numeric(rows[part["column"]], errors="coerce").dropna()
    if values.empty:
        result.missing = [f"a number in rows {part_terms(part)[0][1]} of figures/{csv}.csv"]
        return
    ok = [meets(float(v), bound) for v in values]
    result.seeds = len(ok)
    result.terms = {f"{label}: {sum(ok)} of {len(ok)} rows {bound_of(part)[1]} {bound:g}": 1.0}
    # the worst row: the one farthest on the wrong side (or nearest the bound when all meet it)
    result.diff = float(values.iloc[int(np.argmin(sign * (values.to_numpy() - bound)))])
    result.status = REPRODUCED if all(ok) else NOT_REPRODUCED
    if part.get("error"):
        se = pd.to_numeric(rows.loc[values.index, part["error"]], errors="coerce").fillna(math.inf).to_numpy()
        result.half_width, result.status = _mc_decided(sign * (values.to_numpy() - bound), se, level)


def mc_z(rows: int, level: float = LEVEL) -> float:
    """The two-sided normal quantile at ``level``, Bonferroni-corrected over ``rows`` tests.

    >>> round(mc_z(1), 3), round(mc_z(100), 3)
    (1.96, 3.481)
    """
    return float(norm.ppf(1.0 - (1.0 - level) / (2.0 * max(rows, 1))))


def _mc_decided(margins: np.ndarray, se: np.ndarray, level: float = LEVEL) -> tuple[float, str]:
    """(z·se of the row nearest a flip, the verdict) of rows whose distance past the bound (positive:
    meets it) is ``margins``, each with its Monte-Carlo standard error ``se``: not reproduced if a row
    misses the bound by more than z·se, reproduced if every row meets it by more, undecided otherwise."""
    z = mc_z(len(margins), level)
    width = z * se
    if (margins < -width).any():
        return float(width[int(np.argmin(margins + width))]), NOT_REPRODUCED
    if (margins > width).all():
        return float(width[int(np.argmin(margins - width))]), REPRODUCED
    return float(width[int(np.argmin(np.abs(margins) - width))]), UNDECIDED


def figure_verdict(parts: list[PartResult], combine: str = "all") -> str:
    """The claim's verdict over its run parts: all must hold (``combine`` all), or on every backbone one
    of them (``any``); a part the Monte-Carlo error could flip leaves it undecided."""
    statuses = [p.status for p in parts if p.status != NOT_RUN]
    if not statuses:
        return NOT_RUN
    if combine == "any":
        per_backbone: dict[str, list[str]] = {}
        for p in parts:
            if p.status != NOT_RUN:
                per_backbone.setdefault(p.backbone, []).append(p.status)
        # a backbone holds with one reproduced part, fails when every run part fails, else is undecided
        statuses = [
            REPRODUCED if REPRODUCED in s else (NOT_REPRODUCED if set(s) == {NOT_REPRODUCED} else UNDECIDED)
            for s in per_backbone.values()
        ]
    if NOT_REPRODUCED in statuses:
        return NOT_REPRODUCED
    return UNDECIDED if UNDECIDED in statuses else REPRODUCED


def figure_numbers_text(claim: dict[str, Any], parts: list[PartResult]) -> str:
    """Per run part: its value against its bound (for ``every``: the worst row, and how many meet it)."""
    texts = []
    specs = [part for _ in claim["backbones"] for part in claim["parts"]]
    several = len(claim["backbones"]) > 1
    for spec, p in zip(specs, parts, strict=True):
        if p.status == NOT_RUN:
            continue
        _, symbol, bound = bound_of(spec)
        where = f"{p.backbone}: " if several else ""
        label = next(iter(p.terms))
        # a Monte-Carlo number: the sampling error (z·se) nearest to flipping the part, and its verdict
        width = f"±{p.half_width:.2g}" if math.isfinite(p.half_width) else "error unknown (one batch)"
        mc = f", Monte-Carlo {width}: {p.status}" if spec.get("error") else ""
        if spec.get("noise") == "seeds":
            width = f"±{p.half_width:.3g}" if math.isfinite(p.half_width) else "±?"
            mc = f", {width} over {p.seeds} seed{'s' * (p.seeds != 1)}: {p.status}"
        if spec.get("at", "every") == "every":  # the label says how many rows meet the bound
            texts.append(f"{where}{label} (worst {p.diff:.4g}{mc})")
        else:
            texts.append(f"{where}{label} = {p.diff:.4g} (claimed {symbol} {bound:g}{mc})")
    if texts and any(spec.get("noise") for spec in specs):
        at, one = any_level(claim), "; one part suffices" if claim.get("combine") == "any" else ""
        one = f" (Bonferroni over its {len(claim['parts'])} parts){one}" if at > LEVEL else one
        texts.insert(
            0, f"one run per seed: each mean ± its t-interval at {100 * at:.4g} % over the seeds{one}"
        )
    elif texts and any(spec.get("error") for spec in specs):
        k = len(claim["parts"]) * len(claim["backbones"])  # any_level's family: every part on every backbone
        over = f"its {k} parts and each part's rows" if k > 1 else "rows"
        texts.insert(0, f"simulated: each number a Monte-Carlo mean, ± z·se at 95 % (Bonferroni over {over})")
    elif texts:
        one = "; one part on each backbone suffices" if claim.get("combine") == "any" else ""
        texts.insert(0, f"read off the figure's numbers (one run per point: no seed-noise interval{one})")
    return "; ".join(texts) if texts else "–"
