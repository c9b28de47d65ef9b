"""One part of a paper claim and the rules that decide it (:mod:`contrastlab.report.claims` evaluates
the claims; :mod:`contrastlab.report.trend` the sweep parts): the verdict words, a part's result, and its
verdict from Δ against its interval's half-width."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from contrastlab.stats import one_sided_p, t_quantile

REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_RUN = "reproduced", "not reproduced", "undecided", "not run"
#: A claim that reads "not reproduced" where the paper's own tables do not support its sentence either
#: (its ``paper_tables``): counted and coloured apart, since a perfect reproduction reads the same.
PAPER_UNSUPPORTED = "paper unsupported"
#: A claim not run that a rerun of the preset cannot run either: no part has all its cells in the config's
#: grid (its tasks scored), as the tables word a cell outside it.
NOT_CONFIGURED = "not configured"


def tasks_of(claim: dict[str, Any]) -> list[str]:
    """The claim's ``task`` as a list (a claim may name several: its parts hold on each)."""
    task = claim.get("task")
    return [str(t) for t in task] if isinstance(task, list | tuple) else [str(task)]


@dataclass
class PartResult:
    """One evaluated part (a contrast, or a trend: a slope over a sweep) on one backbone and task."""

    backbone: str
    terms: dict[str, float]
    status: str  # reproduced / not reproduced / undecided / not run
    diff: float = math.nan
    half_width: float = math.nan
    df: float = 0
    paired: bool = False
    seeds: int = 0
    seeds_needed: int | None = None
    missing: list[str] = field(default_factory=list)
    p_value: float = math.nan  # one-sided, against the claim: P(T_ν ≤ Δ / se); NaN when not tested
    spared_by_holm: bool = False  # below its own interval, but not after Holm's correction
    task: str = ""
    trend: str = ""  # a trend part (relation "trend"): what its diff is, e.g. "slope of mpt over m"
    rho: float = math.nan  # a trend part: Spearman's ρ of the point means (a description)
    stand_in: str = ""  # the toy backbone whose cells stand for ``backbone`` (tables.verdict_stand_ins)


def decide(delta: float, width: float) -> str:
    """A part's verdict from Δ (the contrast shifted by the claim's margin) against its half-width."""
    if math.isnan(width):
        return UNDECIDED
    if delta < -width:
        return NOT_REPRODUCED
    return REPRODUCED if delta > width else UNDECIDED


def settle(result: PartResult, delta: float, se: float, level: float) -> None:
    """Decide a tested part on Δ: with ν = ``result.df`` > 0 its half-width t_ν · se and one-sided
    p-value, then its verdict (:func:`decide`; undecided without ν)."""
    if result.df:
        result.half_width = t_quantile(result.df, level) * se
        result.p_value = one_sided_p(delta, se, result.df)
    result.status = decide(delta, result.half_width)
