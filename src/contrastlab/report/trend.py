"""Sweep claims tested as trends: the least-squares slope of a score over a sweep's points.

A figure's sentence ("the model performance decreasing as m increases", Li et al. 2024 §3.2.1) is about
the whole curve, and the figures' sweeps run one seed per point: the residuals about a fitted line
measure the scatter without another seed. A part ``{sweep: <method>, direction: increasing|decreasing,
over: [lo, hi]}`` is decided on b = S_xy / S_xx with se(b) = s / sqrt(S_xx), ν = N − 2 (Holm over the
claim's parts, as for contrasts); a claim with ``phases`` decides each part on its phase's own line, the
noise pooled over the named phases. Curvature widens the interval, never narrows it. The test in full:
``docs/claims.md``, "Trends over a sweep".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from contrastlab.config import Experiment, expanded_methods
from contrastlab.report.parts import NOT_RUN, PartResult, settle, tasks_of
from contrastlab.stats import fit_slope

#: Directions of a trend part and the sign that turns its slope into Δ.
DIRECTIONS = {"increasing": 1.0, "decreasing": -1.0}
SCALES = ("linear", "log")


def check_trend(claim: dict[str, Any], name: str) -> None:
    """Raise ``ValueError`` unless the parts of a ``trend`` claim name a ``sweep`` method and a
    ``direction`` with a valid ``over``, or one of the claim's disjoint ``phases``, at a known ``scale``."""
    if claim.get("scale", "linear") not in SCALES:
        raise ValueError(f"{name}: scale must be one of {SCALES}, got {claim.get('scale')!r}")
    for key in ("margin", "at_least", "noninferiority_margin"):
        if key in claim:
            raise ValueError(f"{name}: {key} is not for relation 'trend' (its parts state a direction)")
    phases = claim.get("phases")
    if claim.get("pool", "stratum") not in ("stratum", "method") or ("pool" in claim and not phases):
        raise ValueError(
            f"{name}: pool is 'stratum' or 'method', for a claim with phases, got {claim['pool']!r}"
        )
    if phases is not None:
        spans = sorted((float(lo), float(hi), ph) for ph, (lo, hi) in dict(phases).items())
        if any(lo >= hi for lo, hi, _ in spans) or any(
            a[1] >= b[0] for a, b in zip(spans, spans[1:], strict=False)
        ):
            raise ValueError(f"{name}: phases must be disjoint [lo, hi] ranges with lo < hi, got {phases!r}")
        for part in claim.get("parts") or []:
            if not isinstance(part, dict) or part.get("phase") not in phases or "over" in part:
                raise ValueError(
                    f"{name}: a part of a claim with phases names one (phase: one of {sorted(phases)}) "
                    f"and no over, got {part!r}"
                )
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
    over = part.get("over") or (claim["phases"][part["phase"]] if "phase" in part else None)
    where = f" in [{float(over[0]):g}, {float(over[1]):g}]" if over else ""
    if "phase" in part:
        where = f" in the {part['phase']!r} phase{where.removeprefix(' in')}"
    sign = ">" if part["direction"] == "increasing" else "<"
    return f"slope of {part['sweep']} over {x}{where} (claimed {sign} 0)"


def x_of(value: float, scale: str) -> float:
    """The regression's x for a swept value (log10 on a ``log`` scale; the value must be > 0)."""
    if scale == "log":
        if value <= 0:
            raise ValueError(f"scale 'log' needs swept values > 0, got {value}")
        return math.log10(value)
    return value


def phase_fit(
    runs: dict[str, list[float]], xs: dict[str, float], spans: list[tuple[float, float]]
) -> tuple[float, int, dict[int, tuple[float, float, float]]]:
    """One method's sweep fitted by one least-squares line per phase: the residual SS, its ν, and per phase
    with ≥ 2 distinct points (slope, S_xx of its runs, S_xx of its points). ``runs``: point -> scores;
    ``xs``: point -> x; ``spans``: the phases' [lo, hi] on the x scale."""
    ss, df, fits = 0.0, 0, {}
    for k, (lo, hi) in enumerate(spans):
        points = [n for n, x in xs.items() if lo - 1e-9 <= x <= hi + 1e-9 and runs.get(n)]
        x = np.array([xs[n] for n in points for _ in runs[n]])
        y = np.array([v for n in points for v in runs[n]])
        if not len(y):
            continue
        if len(points) < 2:
            ss += float(((y - y.mean()) ** 2).sum())
            df += len(y) - 1
            continue
        sxx = float(((x - x.mean()) ** 2).sum())
        slope = float(((x - x.mean()) * (y - y.mean())).sum()) / sxx
        ss += float(((y - y.mean() - slope * (x - x.mean())) ** 2).sum())
        df += len(y) - 2
        px = np.array([xs[n] for n in points])
        fits[k] = (slope, sxx, float(((px - px.mean()) ** 2).sum()))
    return ss, df, fits


def phased_parts(
    claim: dict[str, Any],
    exp: Experiment,
    values: dict,
    level: float,
    stratum_of: Any = None,
) -> tuple[list, list[tuple]]:
    """A ``trend`` claim with ``phases``: each part's slope within its phase, its noise pooled per
    stratum (``stratum_of``; None: per method) from :func:`_phase_pools`; returns as :func:`trend_parts`."""
    scale = claim.get("scale", "linear")
    axis = next(iter(exp.spec.get("sweep") or {"": None})).removeprefix("hp.")
    names = list(claim["phases"])
    spans = [tuple(x_of(float(v), scale) for v in claim["phases"][ph]) for ph in names]
    lo = min(float(v[0]) for v in claim["phases"].values())
    hi = max(float(v[1]) for v in claim["phases"].values())
    parts, pending = [], []
    strata = stratum_of if claim.get("pool", "stratum") == "stratum" else None
    for backbone, task in ((b, t) for b in claim["backbones"] for t in tasks_of(claim)):
        ours = exp.ours(backbone)
        fitted, pools = _phase_pools(claim, exp.spec, values, ours, task, [lo, hi], scale, spans, strata)
        for part in claim["parts"]:
            k = names.index(part["phase"])
            label = trend_label(claim, part, axis)
            in_phase = sweep_points(
                exp.spec, {"sweep": part["sweep"], "over": claim["phases"][part["phase"]]}
            )
            result = PartResult(backbone, {n: 0.0 for n, _ in in_phase}, NOT_RUN, task=task, trend=label)
            parts.append(result)
            fit = fitted.get(part["sweep"])
            result.missing = [n for n, _ in in_phase if not (fit and fit[0].get(n))]
            if result.missing or fit is None or k not in fit[4]:  # a phase's point not run: not run
                result.missing = result.missing or [
                    f"two sweep points of {part['sweep']} in the {part['phase']!r} phase"
                ]
                result.terms = result.terms or {part["sweep"]: 1.0}
                continue
            runs, xs, _, _, fits = fitted[part["sweep"]]
            slope, sxx, sxx_points = fits[k]
            ss, df, per_seed = pools[part["sweep"]]
            mean_x = float(np.mean([xs[n] for n, _ in in_phase]))
            result.terms = {n: (xs[n] - mean_x) / sxx_points for n, _ in in_phase}
            result.diff, result.df = slope, df
            result.seeds = min(len(runs[n]) for n, _ in in_phase)
            delta = DIRECTIONS[part["direction"]] * slope
            s = math.sqrt(ss / df) if df else math.nan
            settle(result, delta, s / math.sqrt(sxx), level)
            df_of = lambda n, d=df, e=per_seed, r=result.seeds: max(d, d + (n - r) * e)  # noqa: E731
            pending.append((result, delta, s, 1 / sxx_points, df_of))
    return parts, pending


def _phase_pools(
    claim: dict[str, Any],
    experiment: dict[str, Any],
    values: dict,
    ours: str,
    task: str,
    over: list[float],
    scale: str,
    spans: list[tuple],
    stratum_of: Any,
) -> tuple[dict[str, tuple], dict[str, list[float]]]:
    """On one backbone and task (``ours``, ``task``), each sweep method's per-phase lines within ``over``
    (method -> (runs, xs, SS, ν, fits), :func:`phase_fit`) and their residuals pooled per stratum
    (``stratum_of(ours, method)``; None: per method): method -> its pool's [SS, ν, ν per extra seed]."""
    fitted: dict[str, tuple] = {}  # sweep method -> (runs, xs, ss, df, fits, points per phase)
    for method in dict.fromkeys(p["sweep"] for p in claim["parts"]):
        points = sweep_points(experiment, {"sweep": method, "over": over})
        runs = {n: values.get((ours, n, task)) or {} for n, _ in points}
        runs = {n: [v for v in r.values() if not math.isnan(v)] for n, r in runs.items()}
        if any(runs.values()):  # a point with no run (diverged) leaves its phase's noise out, no more
            xs = {n: x_of(v, scale) for n, v in points if runs[n]}
            fitted[method] = (runs, xs, *phase_fit(runs, xs, spans))
    pools: dict[Any, list[float]] = {}  # stratum -> [SS, ν, ν per extra seed]
    pool_of: dict[str, list[float]] = {}  # the methods of one stratum share its pool
    for method, (_, xs, ss, df, _) in fitted.items():
        key = stratum_of(ours, method) if stratum_of is not None else method
        pool = pool_of[method] = pools.setdefault(key, [0.0, 0, 0])
        pool[0] += ss
        pool[1] += df
        pool[2] += len(xs)  # each further seed at every point adds one degree of freedom per point
    return fitted, pool_of


def trend_parts(
    claim: dict[str, Any],
    exp: Experiment,
    values: dict,
    level: float,
    stratum_of: Any = None,
) -> tuple[list, list[tuple]]:
    """A ``trend`` claim's parts, each tested by :func:`fit_slope` on ``values`` (diverged runs NaN, left
    out), and per tested part (result, Δ, s, 1 / S_xx,pts, ν(n)) for the seeds per point that would decide
    it (ν(n) = n P − 2 at P points); a claim with ``phases`` per phase (:func:`phased_parts`)."""
    if claim.get("phases"):
        return phased_parts(claim, exp, values, level, stratum_of)
    scale = claim.get("scale", "linear")
    axis = next(iter(exp.spec.get("sweep") or {"": None})).removeprefix("hp.")
    parts, pending = [], []
    for backbone, task in ((b, t) for b in claim["backbones"] for t in tasks_of(claim)):
        ours = exp.ours(backbone)
        for part in claim["parts"]:
            points = sweep_points(exp.spec, part)
            runs = {n: values.get((ours, n, task)) or {} for n, _ in points}
            runs = {n: [v for v in r.values() if not math.isnan(v)] for n, r in runs.items()}
            label = trend_label(claim, part, axis)
            result = PartResult(backbone, {n: 0.0 for n, _ in points}, NOT_RUN, task=task, trend=label)
            parts.append(result)
            result.missing = [n for n, r in runs.items() if not r]
            if len(points) < 2:
                result.missing.append(f"two sweep points of {part['sweep']} (the sweep has {len(points)})")
            if result.missing:
                result.terms = result.terms or {part["sweep"]: 1.0}
                continue
            xs = {n: x_of(v, scale) for n, v in points}
            x = [xs[n] for n, r in runs.items() for _ in r]
            fit = fit_slope(x, [v for r in runs.values() for v in r])
            mean_x = float(np.mean(list(xs.values())))
            result.terms = {n: (x - mean_x) / fit.sxx_points for n, x in xs.items()}
            result.diff, result.df, result.rho = fit.slope, fit.df, fit.rho
            result.seeds = min(len(r) for r in runs.values())
            delta = DIRECTIONS[part["direction"]] * fit.slope
            settle(result, delta, fit.se, level)
            n_points = len(points)
            df_of = lambda n, d=fit.df, p=n_points: max(d, n * p - 2)  # noqa: E731
            pending.append((result, delta, fit.s, 1 / fit.sxx_points, df_of))
    return parts, pending
