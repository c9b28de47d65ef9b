"""The contrast parts of a claim (relations ``>``, ``>=`` and ``count``; :mod:`contrastlab.report.claims`
combines the parts' verdicts): each part resolved to its cells, measured, paired or not, and decided
against its interval.

A part is a linear contrast D = Σ c_i μ_i over cells of one backbone and task (:func:`cell_of`). It is
paired within its strata's seed-blocked pools, or on its own per-seed contrasts, or unpaired on its
cells' pooled seed noise (:func:`pairing`, :func:`~contrastlab.stats.contrast_variance`); h = t_ν · se,
and ``>`` is reproduced if D − m > h, not reproduced if D − m < −h, else undecided; ``>=`` is a
non-inferiority test at the claim's ``noninferiority_margin``. An undecided part carries the seeds per
cell that would decide it. The model and each formula: ``docs/claims.md``, "Contrast parts".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.config import Experiment, expanded_methods
from contrastlab.report.parts import NOT_REPRODUCED, NOT_RUN, PartResult, settle, tasks_of
from contrastlab.stats import blocked_pooled_std, contrast_variance
from contrastlab.tables.metrics import PRETRAINED

__all__ = ["cell_of", "contrast", "contrast_parts", "own_groups", "pairing"]

#: A measured part: (result, the backbone whose cells stand for the claim's, the cells' {seed: score} (none
#: for a part not run or decided without noise), the per-seed contrasts of a paired part, how it is paired).
Measured = tuple[PartResult, str, list[dict], np.ndarray | None, str | None]


def contrast(part: Any) -> dict[str, float]:
    """A part as ``{method: coefficient}`` (``[a, b]`` -> ``{a: 1, b: -1}``)."""
    if isinstance(part, list | tuple):
        if len(part) != 2:
            raise ValueError(f"a part [a, b] names two methods, got {part!r}")
        return {str(part[0]): 1.0, str(part[1]): -1.0}
    return {str(k): float(v) for k, v in dict(part).items()}


def cell_of(term: str, task: str) -> tuple[str, str]:
    """A term's method and task: ``method/task`` names its own task (a contrast across tasks, "10 %
    labels within 3 points of 100 %"), a plain ``method`` is on the part's ``task``."""
    method, _, own = term.partition("/")
    return method, own or task


def _resolve(method: str, experiment: dict, values: dict, backbone: str, task: str) -> str:
    """``name@max|min|best`` -> the sweep point of ``name`` (see the module docstring)."""
    if "@" not in method:
        return method

    base, where = method.split("@", 1)
    points = [(name, over) for name, (b, over) in expanded_methods(experiment).items() if b == base]
    if not points or not experiment.get("sweep"):
        return base
    axis = next(iter(experiment["sweep"]))
    if where in ("max", "min"):
        pick = max if where == "max" else min
        return pick(points, key=lambda p: float(p[1][axis]))[0]
    if where == "best":
        means = {
            n: np.mean(list(values[(backbone, n, task)].values()))
            for n, _ in points
            if (backbone, n, task) in values
        }
        return max(means, key=means.get) if means else points[0][0]
    raise ValueError(f"unknown sweep position {where!r} in {method!r}; use max, min or best")


def contrast_parts(
    claim: dict[str, Any],
    exp: Experiment,
    values: dict,
    pools: pd.DataFrame,
    shift: float,
    level: float,
    stratum_of: Callable[[str, str], str],
) -> tuple[list[PartResult], list[tuple]]:
    """The contrast parts of a claim, each evaluated on its own, and for each tested part (result, Δ, s,
    factor, ν(n)), from which the seeds it would need are computed."""
    measured = _measured_parts(claim, exp, values, stratum_of)
    own = _own_pools([(r, o, ps) for r, o, _, ps, mode in measured if mode == "own"], stratum_of)
    noise = _Noise(values, pools, stratum_of, own)
    parts, pending = [], []
    for result, ours, cells, per_seed, mode in measured:
        if cells:  # else not run, or decided without noise
            pending.append(_decided(result, ours, cells, per_seed, mode, noise, shift, level))
        parts.append(result)
    return parts, pending


def _measured_parts(
    claim: dict[str, Any],
    exp: Experiment,
    values: dict,
    stratum_of: Callable[[str, str], str],
) -> list[Measured]:
    """Every part of the claim on every backbone and task, resolved to its cells and measured
    (:func:`_measured`); a part whose resolved contrast was measured already is measured once."""
    measured: list[Measured] = []
    resolved: set[tuple] = set()  # parts already evaluated, as (backbone, task, resolved terms)
    one_value = all(len(v) < 2 for v in (exp.spec.get("sweep") or {}).values())
    for backbone, task in ((b, t) for b in claim["backbones"] for t in tasks_of(claim)):
        ours = exp.ours(backbone)
        for part in claim["parts"]:
            wanted = contrast(part)
            positions = {cell_of(m, "")[0].split("@", 1)[1] for m in wanted if "@" in m}
            if {"min", "max"} <= positions and one_value:  # @min and @max are one cell: nothing to compare
                result = PartResult(backbone, wanted, NOT_RUN, missing=["a second sweep point"], task=task)
                measured.append((result, ours, [], None, None))
                continue
            terms: dict[str, float] = {}  # each sweep position resolved to its point (_resolve)
            for m, c in wanted.items():  # two positions may resolve to one cell (best = max): add up
                method, cell_task = cell_of(m, task)
                name = _resolve(method, exp.spec, values, ours, cell_task)
                key = name if cell_task == task else f"{name}/{cell_task}"  # a term on another task
                terms[key] = terms.get(key, 0.0) + c
            same = (ours, task, frozenset(terms.items()))
            if same in resolved:  # "at the smallest and at the largest" of a one-point sweep: one contrast
                continue
            resolved.add(same)
            measured.append(_measured(backbone, terms, task, ours, values, stratum_of))
    return measured


def _measured(
    backbone: str,
    terms: dict[str, float],
    task: str,
    ours: str,
    values: dict,
    stratum_of: Callable[[str, str], str],
) -> Measured:
    """One resolved part on its cells: not run when a cell is missing, decided without noise when its
    terms cancel, else its contrast D of the cells' means and, when its cells share their seeds and it
    pairs (:func:`pairing`), its per-seed contrasts D_s."""
    cells = [values.get((ours, *cell_of(m, task))) for m in terms]
    missing = [m for m, v in zip(terms, cells, strict=True) if not v]
    result = PartResult(backbone, terms, NOT_RUN, missing=missing, task=task)
    if missing:
        return result, ours, [], None, None
    if not any(terms.values()):  # e.g. "lower at the largest rate than at the best" when best = largest
        result.status, result.diff, result.half_width, result.seeds = NOT_REPRODUCED, 0.0, 0.0, 0
        result.p_value = 0.0  # certain: no noise in a cell compared with itself
        return result, ours, [], None, None
    common = set.intersection(*(set(v) for v in cells))
    same_seeds = None not in common and len(common) >= 2 and all(set(v) == common for v in cells)
    mode = pairing(terms, result.task, ours, stratum_of) if same_seeds else None
    per_seed = None
    if mode:
        per_seed = np.array(
            [sum(c * v[s] for c, v in zip(terms.values(), cells, strict=True)) for s in sorted(common)]
        )
    result.diff = sum(c * np.mean(list(v.values())) for c, v in zip(terms.values(), cells, strict=True))
    result.paired, result.seeds = per_seed is not None, min(len(v) for v in cells)
    return result, ours, cells, per_seed, mode


@dataclass
class _Noise:
    """Where a measured part's noise comes from: the seed-blocked pool of each (backbone, task, stratum),
    computed once from ``values`` and shared by the parts that use it; the cells' pooled seed noise
    (``pools``); the pools of the parts paired on their own contrasts (``own``)."""

    values: dict
    pools: pd.DataFrame
    stratum_of: Callable[[str, str], str]
    own: dict[int, tuple[float, int]]
    blocked: dict[tuple[str, str, str], tuple[float, int]] = field(default_factory=dict)

    def blocked_pool(self, ours: str, task: str, stratum: str) -> tuple[float, int]:
        key = (ours, task, stratum)
        if key not in self.blocked:
            self.blocked[key] = blocked_pooled_std(
                v
                for (b, m, t), v in self.values.items()
                if b == ours and t == task and m != PRETRAINED and self.stratum_of(ours, m) == stratum
            )
        return self.blocked[key]

    def terms(
        self, result: PartResult, ours: str, cells: list[dict], mode: str | None
    ) -> list[tuple[tuple[str, str, str], float, float, int]]:
        """The part's noisy terms for :func:`~contrastlab.stats.contrast_variance`: (pool, c_i² / n_i,
        the pool's s, ν), from the blocked pools (paired ``"blocked"``) or the cells' pooled noise."""
        noisy = []
        for m, c, v in zip(result.terms, result.terms.values(), cells, strict=True):
            method, cell_task = cell_of(m, result.task)
            if method == PRETRAINED or not c:  # deterministic, or on both sides: no noise
                continue
            key = (ours, cell_task, self.stratum_of(ours, method))  # its protocol's and precision's pool
            if mode == "blocked":
                pool = self.blocked_pool(*key)
            elif key in self.pools.index:
                pool = (self.pools.loc[key, "noise_std"], self.pools.loc[key, "noise_df"])
            else:
                pool = (math.nan, 0)
            noisy.append((key, c * c / len(v), *pool))  # c_i² / n_i: its share of its pool's variance
        return noisy


def _decided(
    result: PartResult,
    ours: str,
    cells: list[dict],
    per_seed: np.ndarray | None,
    mode: str | None,
    noise: _Noise,
    shift: float,
    level: float,
) -> tuple:
    """A measured part's standard error, interval, p-value and verdict (set on ``result``), and what the
    seeds it would need are computed from: (result, Δ, s, factor, ν(n))."""
    delta = result.diff - shift
    # a deterministic cell has no noise
    factor = sum(c * c for m, c in result.terms.items() if cell_of(m, "")[0] != PRETRAINED)
    if mode == "own":  # the part's own per-seed contrasts, pooled only with independent parts
        s_own, result.df = noise.own[id(result)]
        se = s_own / math.sqrt(len(per_seed))
        s_unit, factor = s_own, 1.0  # s_own is already the std of one seed's contrast
    else:  # paired "blocked": the seed-blocked pools; unpaired: the cells' pooled seed noise
        # unpaired: the conservative ν (stats.contrast_variance says why)
        var, result.df = contrast_variance(noise.terms(result, ours, cells, mode), conservative=mode is None)
        se = math.sqrt(var)
        s_unit = math.sqrt(var * result.seeds / factor) if result.df and factor else math.nan
    settle(result, delta, se, level)
    df_of = lambda k, d=result.df: max(d, k - 1)  # noqa: E731
    return result, delta, s_unit, factor, df_of


def pairing(
    terms: dict[str, float], task: str, ours: str, stratum_of: Callable[[str, str], str]
) -> str | None:
    """How a part whose cells share their seeds is paired (the module docstring): ``"blocked"`` when its
    coefficients sum to 0 within each (task, protocol/precision) stratum of its cells, so the seed's
    effect on the stratum cancels; else ``"own"`` when its cells share one protocol and precision (the
    same runs on two tasks, or coefficients that do not sum to 0); else None (unpaired): cells of
    different protocols or precisions share a seed number and nothing else."""
    sums: dict[tuple[str, str], float] = {}
    for m, c in terms.items():
        if not c:  # a cell on both sides (best = max): not in the contrast
            continue
        method, cell_task = cell_of(m, task)
        key = (cell_task, stratum_of(ours, method))
        sums[key] = sums.get(key, 0.0) + c
    if all(abs(v) < 1e-9 for v in sums.values()):
        return "blocked"
    return "own" if len({stratum for _, stratum in sums}) == 1 else None


def _own_pools(
    own: list[tuple[PartResult, str, np.ndarray]], stratum_of: Callable[[str, str], str]
) -> dict[int, tuple[float, int]]:
    """id(part) -> (s_D, ν) for the parts paired on their own per-seed contrasts D_s (the module
    docstring): s_D² = Σ_j Σ_s (D_{j,s} − D̄_j)² / Σ_j (n_j − 1) over each group of :func:`own_groups`."""
    out: dict[int, tuple[float, int]] = {}
    for group in own_groups([(r.terms, r.task, ours) for r, ours, _ in own], stratum_of):
        ss = sum(float(((own[k][2] - own[k][2].mean()) ** 2).sum()) for k in group)
        df = sum(len(own[k][2]) - 1 for k in group)
        for k in group:
            out[id(own[k][0])] = (math.sqrt(ss / df), df)
    return out


def own_groups(
    parts: list[tuple[dict[str, float], str, str]], stratum_of: Callable[[str, str], str]
) -> list[list[int]]:
    """The pools of the parts paired on their own contrasts, ``parts`` as (terms, task, ours backbone):
    lists of indices, the parts of one backbone with the same coefficients on the same (task,
    protocol/precision) strata when no two of them share a cell (independent estimates of one
    variance); each part alone when some do. :mod:`contrastlab.report.power` pools as this does."""
    groups: dict[tuple, list[tuple[int, set]]] = {}
    for k, (terms, task, ours) in enumerate(parts):
        cells = [cell_of(m, task) for m in terms]
        shape = sorted((t, stratum_of(ours, m), c) for (m, t), c in zip(cells, terms.values(), strict=True))
        groups.setdefault((ours, tuple(shape)), []).append((k, {(ours, *cell) for cell in cells}))
    out: list[list[int]] = []
    for members in groups.values():
        disjoint = sum(len(c) for _, c in members) == len(set().union(*(c for _, c in members)))
        out += [[k for k, _ in members]] if disjoint else [[k] for k, _ in members]
    return out
