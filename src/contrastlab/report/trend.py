"""Sweep claims tested as trends: the least-squares slope of a score over a sweep's points.

A figure's sentence ("the model performance decreasing as m increases", Li et al. 2024 §3.2.1) is about
the whole curve, and the figures' sweeps run one seed per point (as the papers' figures do). Two endpoints
of a one-seed sweep have no seed noise to compare them with (the claim stays "undecided" until seeds are
added), but the sweep's points scatter about the curve: the residuals about a fitted line measure that
scatter without another seed. A claim of relation ``trend`` (:mod:`contrastlab.report.claims`) has parts
``{sweep: <method>, direction: increasing|decreasing, over: [lo, hi]}`` (``over`` optional: the sweep
values kept, both ends included) and a claim-level ``scale``: ``linear`` (default) or ``log`` (x is
log10 of the swept value, for rates and temperatures swept over decades).

**The test** (ordinary least squares, every run of every kept point one observation (x_k, y_k),
N ≥ 3 of them at P ≥ 2 distinct x; one seed at two points leaves no residual: undecided)::

    b = S_xy / S_xx,   S_xx = Σ (x_k − x̄)²,   S_xy = Σ (x_k − x̄)(y_k − ȳ)
    s² = Σ (y_k − ȳ − b (x_k − x̄))² / (N − 2),   se(b) = s / sqrt(S_xx),   ν = N − 2

Δ = b for ``increasing``, −b for ``decreasing``; h = t_ν · se(b) (two-sided level
:data:`~contrastlab.stats.LEVEL`): **reproduced** if Δ > h, **not reproduced** if Δ < −h (Holm
over the claim's parts, as for contrasts), else **undecided**. The residuals hold the seed noise and any
curvature the line misses, so a curved but monotone sweep gets a wider interval, never a narrower one
(conservative); a sweep with a peak inside ``over`` fails to be monotone and cannot be "reproduced",
which is why a peak claim (Nie's "0.23 (corresponding the best performance)") is two parts, a rise up to
the peak and a fall after it. With equal seeds per point the slope is the linear contrast of the point
means with coefficients (x_p − x̄) / S_xx,pts, which the part's ``terms`` record. Spearman's ρ of the
point means is printed beside it (a description: with P ≤ 8 points its own test is coarse).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from contrastlab.config import expanded_methods
from contrastlab.report.parts import NOT_RUN, PartResult, decide, ours_backbone, tasks_of
from contrastlab.stats import fit_slope, one_sided_p, t_quantile

#: Directions of a trend part and the sign that turns its slope into Δ.
DIRECTIONS = {"increasing": 1.0, "decreasing": -1.0}
SCALES = ("linear", "log")


def check_trend(claim: dict[str, Any], name: str) -> None:
    """Raise ``ValueError`` unless every part of a ``trend`` claim names its ``sweep`` method and a
    ``direction``, its ``over`` (if any) is [lo, hi] with lo < hi, and the claim's ``scale`` is known."""
    if claim.get("scale", "linear") not in SCALES:
        raise ValueError(f"{name}: scale must be one of {SCALES}, got {claim.get('scale')!r}")
    for key in ("margin", "at_least", "noninferiority_margin"):
        if key in claim:
            raise ValueError(f"{name}: {key} is not for relation 'trend' (its parts state a direction)")
    for part in claim.get("parts") or []:
        if not isinstance(part, dict) or not isinstance(part.get("sweep"), str):
            raise ValueError(f"{name}: a trend part is {{sweep: <method>, direction: ...}}, got {part!r}")
        if part.get("direction") not in DIRECTIONS:
            raise ValueError(f"{name}: direction must be one of {tuple(DIRECTIONS)}, got {part!r}")
        over = part.get("over")
        if over is not None and not (len(over) == 2 and float(over[0]) < float(over[1])):
            raise ValueError(f"{name}: over must be [lo, hi] with lo < hi, got {over!r}")


def sweep_points(experiment: dict[str, Any], part: dict[str, Any]) -> list[tuple[str, float]]:
    """(cell name, swept value) of the part's method at the sweep values within its ``over``, in sweep
    order; empty when the experiment has no sweep."""
    sweep = experiment.get("sweep") or {}
    if not sweep:
        return []
    axis = next(iter(sweep))
    lo, hi = (float(v) for v in part.get("over") or (-math.inf, math.inf))
    rel = 1e-9  # swept values are typed in YAML: compare with a tolerance, both ends included
    return [
        (name, float(over[axis]))
        for name, (base, over) in expanded_methods(experiment).items()
        if base == part["sweep"] and lo - rel * abs(lo) <= float(over[axis]) <= hi + rel * abs(hi)
    ]


def trend_label(claim: dict[str, Any], part: dict[str, Any], axis: str) -> str:
    """How the numbers name a part, e.g. "slope of baseline over log10 tau in [0.1, 3] (claimed < 0)"."""
    x = f"log10 {axis}" if claim.get("scale") == "log" else axis
    over = part.get("over")
    where = f" in [{float(over[0]):g}, {float(over[1]):g}]" if over else ""
    sign = ">" if part["direction"] == "increasing" else "<"
    return f"slope of {part['sweep']} over {x}{where} (claimed {sign} 0)"


def x_of(value: float, scale: str) -> float:
    """The regression's x for a swept value (log10 on a ``log`` scale; the value must be > 0)."""
    if scale == "log":
        if value <= 0:
            raise ValueError(f"scale 'log' needs swept values > 0, got {value}")
        return math.log10(value)
    return value


def trend_parts(
    claim: dict[str, Any],
    experiment: dict[str, Any],
    values: dict,
    ours_for: dict[str, str],
    level: float,
) -> tuple[list, list[tuple]]:
    """A ``trend`` claim's parts, each tested by :func:`fit_slope` on ``values`` ((backbone, method,
    task) -> {seed: score}, diverged runs NaN and left out), and for each tested part (result, Δ, s,
    1 / S_xx,pts, ν(n)), from which :func:`~contrastlab.report.claims.evaluate_claim` computes the seeds
    per point that would decide it (ν(n) = n P − 2 with n seeds at each of the P points)."""
    scale = claim.get("scale", "linear")
    axis = next(iter(experiment.get("sweep") or {"": None})).removeprefix("hp.")
    parts, pending = [], []
    for backbone, task in ((b, t) for b in claim["backbones"] for t in tasks_of(claim)):
        ours = ours_backbone(backbone, experiment, ours_for)
        for part in claim["parts"]:
            points = sweep_points(experiment, part)
            runs = {n: values.get((ours, n, task)) or {} for n, _ in points}
            runs = {n: [v for v in r.values() if not math.isnan(v)] for n, r in runs.items()}
            label = trend_label(claim, part, axis)
            result = PartResult(backbone, {n: 0.0 for n, _ in points}, NOT_RUN, task=task, trend=label)
            result.missing = [n for n, r in runs.items() if not r]
            if len(points) < 2:
                result.missing.append(f"two sweep points of {part['sweep']} (the sweep has {len(points)})")
            if result.missing:
                result.terms = result.terms or {part["sweep"]: 1.0}
                parts.append(result)
                continue
            xs = {n: x_of(v, scale) for n, v in points}
            x = [xs[n] for n, r in runs.items() for _ in r]
            fit = fit_slope(x, [v for r in runs.values() for v in r])
            mean_x = float(np.mean(list(xs.values())))
            result.terms = {n: (x - mean_x) / fit.sxx_points for n, x in xs.items()}
            result.diff, result.df, result.rho = fit.slope, fit.df, fit.rho
            result.seeds = min(len(r) for r in runs.values())
            delta = DIRECTIONS[part["direction"]] * fit.slope
            if fit.df:
                result.half_width = t_quantile(fit.df, level) * fit.se
                result.p_value = one_sided_p(delta, fit.se, fit.df)
            result.status = decide(delta, result.half_width)
            n_points = len(points)
            df_of = lambda n, d=fit.df, p=n_points: max(d, n * p - 2)  # noqa: E731
            pending.append((result, delta, fit.s, 1 / fit.sxx_points, df_of))
            parts.append(result)
    return parts, pending
