"""The simulation of ``make plan``'s claims section (:mod:`contrastlab.report.power`): R perfect
reproductions of one claim at once, each decided by the claims' own rule, on arrays.

A perfect reproduction has the paper's own numbers as its cell means and seed noise around them:
x_{i,s} = μ_i + σ_i z_{i,s}, z ~ N(0, 1) independent (a "Pretrained" cell is deterministic). Each
replicate applies the rule of :mod:`contrastlab.report.contrasts` to the claim's :class:`Structure`
(paired within strata, on its own contrasts, or unpaired; Holm over the tested parts); a stratum's other
cells enter through their residual sums of squares and per-seed means, drawn exactly in distribution.
All the parts of one replicate read the same draws, so their dependence is the real rule's. The
formulas: ``docs/claims.md``, "The power simulation".
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from contrastlab.report.parts import NOT_REPRODUCED, REPRODUCED, UNDECIDED
from contrastlab.stats import LEVEL, haircut, holm_rejections, one_sided_p, satterthwaite, t_quantile

#: Replicates per (claim, n): the Monte-Carlo standard error of P near 0.9 is sqrt(0.09 / R) ≈ 0.01.
REPLICATES = 1000


@dataclass
class Structure:
    """What the simulation needs of one claim: its noisy cells (ours backbone, method, task) with mean μ
    and σ, their pools (a pool is a stratum: backbone, task, protocol/precision), the parts'
    coefficients over those cells and how each is paired, and the claim's rule."""

    claim: dict[str, Any]
    experiment: str
    cells: list[tuple[str, str, str]]
    mu: np.ndarray  # (C,)
    sigma: np.ndarray  # (C,)
    pool: np.ndarray  # (C,) index into pool_cells
    pool_cells: np.ndarray  # (Q,) cells of each pool in the config's grid (m)
    pool_sigma: np.ndarray  # (Q,)
    coef: np.ndarray  # (P, C)
    fixed: np.ndarray  # (P,) the deterministic terms' Σ c μ (Pretrained)
    deterministic: np.ndarray  # (P,) bool: the part has a deterministic term (never paired)
    certain_nr: int  # parts whose terms cancel (a cell against itself): "not reproduced", p = 0
    shift: float
    expected: str
    seeds: int  # configured seeds per cell
    #: (P,) how each part is paired at n ≥ 2: UNPAIRED, BLOCKED or OWN
    mode: np.ndarray
    #: (P,) the pool of an OWN part's per-seed contrasts (contrasts.own_groups), −1 for the others
    own_pool: np.ndarray
    level: float = LEVEL


#: How a part is paired (:func:`~contrastlab.report.contrasts.pairing`).
UNPAIRED, BLOCKED, OWN = 0, 1, 2


VERDICT_CODES = (REPRODUCED, NOT_REPRODUCED, UNDECIDED)


def simulate(
    s: Structure, n: int, replicates: int, rng: np.random.Generator, mu: np.ndarray | None = None
) -> np.ndarray:
    """The verdict codes (:data:`VERDICT_CODES`) of ``replicates`` perfect reproductions of the claim
    at ``n`` seeds per cell (``mu``: other cell means, e.g. its boundary), by the module docstring's rule."""
    mean = s.mu if mu is None else mu
    R, C = replicates, len(s.cells)
    x = mean[None, :, None] + s.sigma[None, :, None] * rng.standard_normal((R, C, n))
    xbar = x.mean(axis=2)
    delta = xbar @ s.coef.T + s.fixed[None, :] - s.shift  # (R, P)
    se, df = _standard_errors(s, x, xbar, rng)
    return _verdicts(s, delta, se, df)


def _standard_errors(
    s: Structure, x: np.ndarray, xbar: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Each replicate's and part's se_j and ν_j (R, P) from the claim's cells ``x`` (R, C, n): paired
    within strata, on its own contrasts, or unpaired (the module docstring); with one seed, none but
    for a part of deterministic cells only (se 0, ν ∞)."""
    R, _, n = x.shape
    P = len(s.coef)
    se = np.full((R, P), np.nan)
    df = np.zeros((R, P))
    if n < 2:  # one seed: no noise estimate, except for a part of deterministic cells only
        for j in np.flatnonzero(~s.coef.any(axis=1)):
            se[:, j], df[:, j] = 0.0, np.inf
        return se, df
    s2_unpaired, df_unpaired, s2_blocked, df_blocked = _stratum_noise(s, x, xbar, rng)
    weight = np.zeros((P, len(s.pool_cells)))  # Σ_{i in g} c_ji² / n
    for i, q in enumerate(s.pool):
        weight[:, q] += s.coef[:, i] ** 2 / n
    for j in np.flatnonzero(s.mode != OWN):
        if not weight[j].any():  # deterministic cells only
            se[:, j], df[:, j] = 0.0, np.inf
            continue
        s2, nu = (s2_blocked, df_blocked) if s.mode[j] == BLOCKED else (s2_unpaired, df_unpaired)
        used = weight[j] > 0
        nu_j = nu[used]
        if s.mode[j] == UNPAIRED and used.sum() > 1:  # claims.py's conservative ν (stats.haircut)
            nu_j = haircut(nu_j)
        var, df[:, j] = satterthwaite(s2[:, used] * weight[j, used], nu_j)
        se[:, j] = np.sqrt(var)
    own = np.flatnonzero(s.mode == OWN)
    per_seed = np.einsum("rcn,pc->rpn", x, s.coef[own])  # D_{j,s}
    ss = ((per_seed - per_seed.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)  # (R, own)
    for k in np.unique(s.own_pool[own]):
        members = s.own_pool[own] == k
        nu = int(members.sum()) * (n - 1)
        se[:, own[members]] = np.sqrt(ss[:, members].sum(axis=1) / nu / n)[:, None]
        df[:, own[members]] = nu
    return se, df


def _verdicts(s: Structure, delta: np.ndarray, se: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Each replicate's verdict code from its parts' Δ, se and ν (R, P): each tested part against its
    interval, Holm over the tested parts (the certain ones included, p = 0), combined as the claim's
    relation combines them."""
    R, P = delta.shape
    tested = df[0] > 0
    status = np.full((R, P), 2)  # undecided
    p = np.full((R, P), np.nan)
    if tested.any():
        d, e, f = delta[:, tested], se[:, tested], df[:, tested]
        h = t_quantile(f, s.level) * e
        st = np.where(d > h, 0, np.where(d < -h, 1, 2))
        status[:, tested], p[:, tested] = st, one_sided_p(d, e, f)
    # Holm over the tested parts (the certain ones included, p = 0), as claims.evaluate_claim
    alpha = (1 - s.level) / 2
    family = np.concatenate([p[:, tested], np.zeros((R, s.certain_nr))], axis=1)
    fam_status = np.concatenate([status[:, tested], np.ones((R, s.certain_nr), dtype=int)], axis=1)
    if family.shape[1]:
        rejected = holm_rejections(family, alpha)
        fam_status = np.where(rejected, 1, np.where(fam_status == 1, 2, fam_status))
    final = np.concatenate([fam_status, status[:, ~tested]], axis=1)
    contradicted = (final == 1).sum(axis=1)
    if s.claim.get("relation") == "count":
        need = int(s.claim["at_least"])  # a part counts at α / (N − need + 1) only, as claims.py counts it
        q = 1 - np.concatenate([p[:, tested], np.zeros((R, s.certain_nr)), p[:, ~tested]], axis=1)
        reproduced = ((final == 0) & (q < alpha / (final.shape[1] - need + 1))).sum(axis=1)
        return np.where(reproduced >= need, 0, np.where(final.shape[1] - contradicted < need, 1, 2))
    return np.where(contradicted > 0, 1, np.where((final == 2).any(axis=1), 2, 0))


def _stratum_noise(
    s: Structure, x: np.ndarray, xbar: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per replicate and stratum (pool) g, from the claim's cells ``x`` (R, C, n) and the stratum's other
    cells drawn as the module docstring says: the unpaired pooled variance s_p² = SS_within / (C_g (n −
    1)) and the seed-blocked s_g² = SS_res / ((C_g − 1)(n − 1)), each (R, Q), and their ν (Q,)."""
    R, _, n = x.shape
    Q = len(s.pool_cells)
    used = np.bincount(s.pool, minlength=Q)
    total = np.maximum(s.pool_cells, used)
    other = total - used
    within = np.zeros((R, Q))
    np.add.at(within.T, s.pool, ((x - xbar[:, :, None]) ** 2).sum(axis=2).T)
    profile = np.zeros((R, Q, n))  # Σ_{i in g} centred per-seed values: c_g ũ_s, then + o_g p̃_s
    np.add.at(profile.transpose(1, 0, 2), s.pool, (x - xbar[:, :, None]).transpose(1, 0, 2))
    for q in np.flatnonzero(other):
        sigma = s.pool_sigma[q]
        if other[q] > 1:
            within[:, q] += sigma**2 * rng.chisquare((other[q] - 1) * (n - 1), R)  # SS_res,O
        p_s = sigma / math.sqrt(other[q]) * rng.standard_normal((R, n))
        p_s -= p_s.mean(axis=1, keepdims=True)
        within[:, q] += other[q] * (p_s**2).sum(axis=1)
        profile[:, q] += other[q] * p_s
    residual = within - (profile**2).sum(axis=2) / total[None, :]
    df_unpaired = total * (n - 1)
    df_blocked = (total - 1) * (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return within / df_unpaired, df_unpaired, residual / df_blocked, df_blocked


def boundary_means(s: Structure) -> np.ndarray | None:
    """Cell means nearest the paper's (least squares) with every part at its claim's boundary, Δ_j = 0:
    the least favourable truth for a false "not reproduced"; None when the parts cannot all sit there."""
    if s.certain_nr or not len(s.coef):
        return None
    target = s.shift - s.fixed
    step, *_ = np.linalg.lstsq(s.coef, target - s.coef @ s.mu, rcond=None)
    mu = s.mu + step
    return mu if np.allclose(s.coef @ mu, target, atol=1e-9) else None


def decided_probability(s: Structure, n: int, replicates: int = REPLICATES, seed: int = 0) -> float:
    """P(verdict = expected) at ``n`` seeds per cell, from ``replicates`` draws seeded by the claim."""
    rng = np.random.default_rng([seed, zlib.crc32(s.claim["id"].encode()), n])
    codes = simulate(s, n, replicates, rng)
    return float((codes == VERDICT_CODES.index(s.expected)).mean())
