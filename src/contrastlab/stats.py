"""The statistics every verdict uses, in one place: the confidence level, seed-noise pooling and
intervals (:mod:`contrastlab.tables.verdicts`), seed-blocked pooling for paired contrasts, one-sided
p-values, contrasts over noise pools, Holm's correction and the seeds a difference needs
(:mod:`contrastlab.report.claims`), and the least-squares slope of a sweep
(:mod:`contrastlab.report.trend`). The modules that use them say what each decides. scipy is imported
where it is used: the workflow imports this module when it parses the Snakefile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

#: Two-sided confidence level of every interval.
LEVEL = 0.95


def pooled_std(groups: Iterable[Iterable[float]]) -> tuple[float, int]:
    """Pooled standard deviation s_p and its degrees of freedom ν = Σ(n_i − 1) over groups of seed
    values (see the module docstring); ``(nan, 0)`` when no group has two values."""
    ss, df = 0.0, 0
    for values in groups:
        x = np.asarray(list(values), dtype=float)
        x = x[~np.isnan(x)]
        if len(x) >= 2:
            ss += float(((x - x.mean()) ** 2).sum())
            df += len(x) - 1
    return (math.sqrt(ss / df) if df else math.nan), df


def blocked_pooled_std(cells: Iterable[Mapping[Hashable, float]]) -> tuple[float, int]:
    """Pooled seed noise of cells that share seeds, the seed blocked out (two-way additive model,
    cells × seeds without interaction: the randomized-block analysis of variance), and its degrees of
    freedom; ``cells`` maps each cell's seeds to its score.

    Model x_{i,s} = μ_i + β_s + ε_{i,s}, ε_{i,s} ~ N(0, σ²) independent: β_s is what seed s does to every
    cell of the stratum (its data order, its initialisation), which a paired contrast Σ c_i x_{i,s} with
    Σ c_i = 0 cancels. σ² is estimated from the residuals of the least-squares fit of μ and β::

        s² = Σ_{i,s} (x_{i,s} − μ̂_i − β̂_s)²  /  ν,        ν = N − rank(design)

    N the values, the design the cell and seed indicators. When every one of C cells has the same n
    seeds the residual is x_{i,s} − x̄_{i·} − x̄_{·s} + x̄_{··} and ν = (C − 1)(n − 1): one estimate
    from all the stratum's cells, whatever contrasts of them a claim tests. (Pooling the per-seed
    contrasts of several parts instead, s_D² = Σ_j SS_j / Σ_j (n − 1), counts a cell shared by two parts
    twice: all C(C − 1)/2 pairs of C cells give the same s_D² = 2 s² with ν = C(C − 1)/2 · (n − 1).)
    A cell with one seed adds nothing; ``(nan, 0)`` when no residual is left (one cell, one seed).

    >>> s, df = blocked_pooled_std([{1: 71.0, 2: 72.0}, {1: 73.0, 2: 75.0}])  # one paired difference
    >>> round(s**2, 6), df  # half the variance (0.5) of the per-seed differences 2 and 3
    (0.25, 1)
    """
    rows = [(i, seed, float(v)) for i, cell in enumerate(cells) for seed, v in cell.items()]
    rows = [r for r in rows if not math.isnan(r[2])]
    if not rows:
        return math.nan, 0
    cell_ids = sorted({r[0] for r in rows})
    seed_ids = sorted({r[1] for r in rows}, key=repr)
    design = np.zeros((len(rows), len(cell_ids) + len(seed_ids)))
    for row, (i, seed, _) in enumerate(rows):
        design[row, cell_ids.index(i)] = 1.0
        design[row, len(cell_ids) + seed_ids.index(seed)] = 1.0
    y = np.array([r[2] for r in rows])
    df = len(rows) - int(np.linalg.matrix_rank(design))
    if df <= 0:
        return math.nan, 0
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    resid = y - design @ coef
    return math.sqrt(float(resid @ resid) / df), df


def t_quantile(df, level: float = LEVEL):
    """The two-sided Student-t quantile t_{df, (1+level)/2} (normal quantile for df = inf); a float, or
    an array for an array of ``df`` (elementwise)."""
    if np.ndim(df) == 0:
        return _scalar_t_quantile(float(df), float(level))
    import scipy.stats

    return scipy.stats.t.ppf((1 + level) / 2, df)


@functools.lru_cache(maxsize=4096)
def _scalar_t_quantile(df: float, level: float) -> float:
    # A report asks the same few (df, level) thousands of times, and scipy's ppf costs ~1 ms a call.
    import scipy.stats

    return float(scipy.stats.t.ppf((1 + level) / 2, df))


def half_width(std: float, df: float, n: int, k: int | None, level: float = LEVEL) -> float:
    """Half-width t_{df} · std · sqrt(1/n + 1/k) of the interval for ours (mean of ``n`` seeds) minus a
    published mean of ``k`` runs (``k=None``: the published number is exact, the term drops); NaN when
    ``df`` is 0."""
    if not df or n < 1 or math.isnan(std):
        return math.nan
    return t_quantile(df, level) * std * math.sqrt(1 / n + (1 / k if k else 0.0))


def one_sided_p(delta, se, df):
    """P(T_df ≤ Δ / se): the p-value of "the part contradicts the claim" (Δ below 0); se 0: 0 or 1. A
    float, or an array for arrays (elementwise, broadcast)."""
    import scipy.stats

    if np.ndim(delta) == 0 and np.ndim(se) == 0 and np.ndim(df) == 0:
        if se == 0:
            return 0.0 if delta < 0 else 1.0
        return float(scipy.stats.t.cdf(delta / se, df))
    delta, se = np.asarray(delta, dtype=float), np.asarray(se, dtype=float)
    noisy = se > 0
    p = scipy.stats.t.cdf(delta / np.where(noisy, se, 1.0), df)
    return np.where(noisy, p, (delta >= 0).astype(float))


def contrast_variance(
    terms: list[tuple[Hashable, float, float, float]], conservative: bool = False
) -> tuple[float, float]:
    """Variance of an unpaired contrast Σ c_i x̄_i and its degrees of freedom, from its noisy terms
    ``(pool, c_i² / n_i, s_pool, ν_pool)``.

    Terms of one pool share one variance estimate s_p², so they are not independent estimates: their
    variances add up, V_p = s_p² Σ_{i in p} c_i² / n_i, and V_p carries the pool's own ν_p once. Only
    distinct pools are independent, combined by Welch–Satterthwaite: ν = (Σ_p V_p)² / Σ_p (V_p² / ν_p)
    (one pool: ν = ν_p). No noisy term: (0, inf); a pool without a noise estimate (ν_p = 0): (nan, 0).

    ``conservative``: Welch–Satterthwaite over the pools' ν_p − 2 (:data:`DF_HAIRCUT`; never below 1)
    instead of ν_p. The Satterthwaite ν matches two moments and is too large in the far tail where Holm's
    correction tests, when few pools of small ν_p carry similar shares: Li's 32-part unpaired claim (pools
    of ν 30 and 4) at its boundary erred at 0.028 for α = 0.025, at 0.024 with a haircut of 1 and 0.018
    with 2; Hsu's smallest ν_p (0.000) throws the power away. The claims' unpaired path uses it
    (:mod:`contrastlab.report.claims`); with one pool the plain rule (ν = ν_p) applies.

    >>> contrast_variance([("a", 1 / 3, 1.0, 4), ("a", 1 / 2, 1.0, 4)])  # one pool: its ν = 4, not 7.69
    (0.8333333333333333, 4.0)
    >>> contrast_variance([("a", 0.5, 1.0, 4), ("b", 0.5, 1.0, 4)], conservative=True)  # 2 × 2, not 8
    (1.0, 4.0)
    """
    per_pool: dict[Hashable, list[float]] = {}  # pool -> [V_p, ν_p]
    for pool, weight, std, df in terms:
        if not df or math.isnan(std):
            return math.nan, 0
        per_pool.setdefault(pool, [0.0, float(df)])[0] += weight * std * std
    if not per_pool or not sum(v for v, _ in per_pool.values()):
        return 0.0, math.inf
    variances, dfs = np.array(list(per_pool.values())).T
    if conservative and len(dfs) > 1:
        dfs = haircut(dfs)
    var, df = satterthwaite(variances, dfs)
    return float(var), float(df)


#: Degrees of freedom taken off each pool before Welch–Satterthwaite in the conservative rule.
DF_HAIRCUT = 2


def haircut(dfs):
    """The pools' ν_p − :data:`DF_HAIRCUT`, at least 1 (:func:`contrast_variance`'s conservative rule)."""
    return np.maximum(np.asarray(dfs, dtype=float) - DF_HAIRCUT, 1.0)


def satterthwaite(variances, dfs) -> tuple:
    """Welch–Satterthwaite over independent variance estimates V_p with ν_p degrees of freedom each,
    along the last axis: V = Σ_p V_p, ν = V² / Σ_p (V_p² / ν_p) (a term with V_p = 0 drops out; V = 0
    gives ν NaN). Arrays broadcast, so a simulation combines many replicates at once
    (:mod:`contrastlab.report.power`); :func:`contrast_variance` is its use on one contrast.

    >>> satterthwaite([0.5, 0.5], [4, 4])  # two equal pools: ν doubles
    (1.0, 8.0)
    """
    v, d = np.broadcast_arrays(np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float))
    var = v.sum(axis=-1)
    share = np.divide(v * v, d, out=np.zeros_like(v), where=v > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = var**2 / share.sum(axis=-1)
    if np.ndim(var) == 0:
        return float(var), float(df)
    return var, df


def holm_rejections(p_values, alpha: float):
    """Holm's step-down procedure (Holm 1979, "A simple sequentially rejective multiple test procedure"):
    with the k p-values sorted, p_(1) ≤ … ≤ p_(k), reject H_(j) while p_(j) < α / (k − j + 1) and stop at
    the first that is not. The chance of any false rejection stays ≤ α for any dependence between the
    tests. Strict "<", so one test (k = 1) rejects exactly when its interval's edge is passed.

    ``p_values``: one family (a list: a list of bools back) or an array whose last axis is the family,
    one per row (an array of bools back: :mod:`contrastlab.report.power`'s replicates). Ties keep their
    order.

    >>> holm_rejections([0.01, 0.04, 0.03, 0.005], 0.05)
    [True, False, False, True]
    """
    p = np.asarray(p_values, dtype=float)
    k = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    passed = np.take_along_axis(p, order, axis=-1) < alpha / (k - np.arange(k))
    rejected = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(rejected, order, np.cumprod(passed, axis=-1).astype(bool), axis=-1)
    return rejected.tolist() if p.ndim == 1 else rejected


def seeds_needed(
    diff: float, s: float, factor: float, df_of, start: int, level: float = LEVEL, most: int = 100
) -> int | None:
    """Smallest n ≥ start with t_{df_of(n)} · s · sqrt(factor / n) < |diff|, t at the two-sided ``level``
    (None: not at or below ``most``)."""
    for n in range(max(start, 2), most + 1):
        df = df_of(n)
        if df > 0 and t_quantile(df, level) * s * math.sqrt(factor / n) < abs(diff):
            return n
    return None


@dataclass(frozen=True)
class Slope:
    """A least-squares slope with its standard error and degrees of freedom (see the module docstring)."""

    slope: float
    se: float
    df: int
    s: float  # residual standard deviation
    sxx_points: float  # Σ_p (x_p − x̄)² over the distinct points (one seed each): se = s / sqrt(n S_xx,pts)
    rho: float  # Spearman's rank correlation of the point means with x (NaN: fewer than 3 points)


def fit_slope(x: list[float] | np.ndarray, y: list[float] | np.ndarray) -> Slope:
    """The slope of ``y`` on ``x`` (one observation per run), its standard error from the residuals and
    ν = N − 2; ``df`` 0 (se NaN) with fewer than three observations, slope NaN too with one distinct x.

    >>> fit = fit_slope([0, 1, 2, 3], [1, 2, 4, 5])
    >>> round(fit.slope, 6), round(fit.se**2, 6), fit.df
    (1.4, 0.02, 2)
    """
    import scipy.stats

    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    points = np.unique(xa)
    if len(points) < 2:
        return Slope(math.nan, math.nan, 0, math.nan, math.nan, math.nan)
    dx = xa - xa.mean()
    sxx = float((dx * dx).sum())
    slope = float((dx * (ya - ya.mean())).sum() / sxx)
    resid = ya - ya.mean() - slope * dx
    df = len(xa) - 2
    s = math.sqrt(float((resid * resid).sum()) / df) if df else math.nan
    means = np.array([ya[xa == p].mean() for p in points])
    rho = float(scipy.stats.spearmanr(points, means)[0]) if len(points) >= 3 else math.nan
    sxx_points = float(((points - points.mean()) ** 2).sum())
    return Slope(slope, s / math.sqrt(sxx), df, s, sxx_points, rho)
