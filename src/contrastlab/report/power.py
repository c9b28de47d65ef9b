"""Power before the run: the chance that a *perfect* reproduction decides each claim at the configured
seeds, the seeds per cell it needs to decide it, and what those seeds cost (``make plan``'s claims section).

**A perfect reproduction** has the paper's own numbers as its cell means (the control's cells,
:func:`~contrastlab.report.control.published_cells`) and seed noise around them: seed s of cell i scores
x_{i,s} = μ_i + σ_i z_{i,s}, z ~ N(0, 1) independent, σ_i the prior of its metric (:data:`NOISE_PRIOR`;
a "Pretrained" cell is deterministic). Its *expected verdict* is "reproduced", or "not reproduced" for a
claim whose sentence the paper's own tables fail (``paper_tables``). **P(decided)** is the probability
that the claim's verdict is its expected one; a claim is **decidable** at n seeds per cell when
P(decided) ≥ :data:`TARGET`.

**The simulation** applies the decision rule of :mod:`contrastlab.report.claims` to R replicates at once
(its module docstring has the formulas; the claim's structure, its parts with their terms resolved, comes
from one evaluation on the papers' numbers, :func:`~contrastlab.report.control.control_results`'s):

- D_j = Σ_i c_{ji} x̄_i (+ the deterministic terms), Δ_j = D_j − m (``>``, ``count``) or D_j + M (``>=``);
- each part is paired or not as claims.py pairs it (:func:`~contrastlab.report.claims.pairing`, n ≥ 2,
  no deterministic term). A stratum g is (backbone, task, protocol/precision)
  (:func:`~contrastlab.tables.verdicts.cell_stratum`), with C_g = max(m_g, c_g) trained cells: m_g its
  cells in the config's grid, c_g the claim's cells in it. Its c_g claim cells are drawn seed by seed;
  its C_g − c_g = o_g other cells enter through what the rule reads of them, drawn exactly in
  distribution (a normal sample's residual sums of squares are independent of its means): their
  residual SS_res,O ~ σ_g² χ²_{(o_g − 1)(n − 1)} and their per-seed mean p_s ~ N(·, σ_g² / o_g). Then
  with ũ_s, p̃_s the centred per-seed means of the claim's and the other cells,
  SS_within = Σ_{i in g} Σ_s (x_{i,s} − x̄_i)² + SS_res,O + o_g Σ_s p̃_s² and the seed-blocked residual
  SS_res = SS_within − C_g Σ_s ((c_g ũ_s + o_g p̃_s) / C_g)² (the randomized-block decomposition,
  :func:`~contrastlab.stats.blocked_pooled_std`);
- paired within strata (``blocked``: the coefficients sum to 0 in each stratum): s_g² = SS_res /
  ν_g, ν_g = (C_g − 1)(n − 1); se_j² = Σ_g s_g² Σ_{i in g} c_{ji}² / n, ν_j by Welch–Satterthwaite over
  the distinct strata, each stratum's ν_g once (:func:`~contrastlab.stats.satterthwaite`, as
  :func:`~contrastlab.stats.contrast_variance`);
- paired on its own contrasts (``own``: one protocol and precision, coefficients that do not cancel per
  stratum, e.g. the same runs on two tasks): D_{j,s} = Σ_i c_{ji} x_{i,s},
  s_D² = Σ_{j in k} Σ_s (D_{j,s} − D̄_j)² / (|k| (n − 1)) over its pool k
  (:func:`~contrastlab.report.claims.own_groups`), ν = |k| (n − 1), se_j = s_D / sqrt(n);
- unpaired (a deterministic term, or cells of several protocols/precisions, or n = 1): s_p² =
  SS_within / (C_g (n − 1)), ν_p = C_g (n − 1); se_j² = Σ_p s_p² Σ_{i in p} c_{ji}² / n, ν_j by
  Welch–Satterthwaite over its pools' ν_p − 2 (claims.py's conservative rule,
  :func:`~contrastlab.stats.contrast_variance`); n = 1: ν = 0, undecided;
- h_j = t_{ν, (1+level)/2} se_j, p_j = P(T_ν ≤ Δ_j / se_j) (:func:`~contrastlab.stats.t_quantile`,
  :func:`~contrastlab.stats.one_sided_p`); Holm at α = (1 − level) / 2 over the tested parts; the
  verdict over the parts as claims.py combines them (``count``: at least ``at_least``).

All the parts of one replicate read the same draws, so their dependence (a shared cell, a shared
stratum estimate) is the real rule's. The model has no seed effect shared by a stratum's cells
(β_s = 0 in claims.py's x_{i,s} = μ_i + β_s + ε_{i,s}): the blocked rule's distribution does not depend
on β, the unpaired one's is then the one the noisy control draws.

Approximations, each in the direction of the report's own behaviour: ``@best`` is the paper's printed
best cell (the winner's curse of picking it from our noisy means, audit S-6, is not simulated); trend
claims and claims on figures only have no numbers to simulate; a ``figure_values`` claim is a reading of
a regenerated figure, one run per point and no seed noise (:mod:`contrastlab.report.figure_values`): not
simulated, and counted apart in the plan.

**Seeds needed**: the smallest n in 2 … :data:`MAX_SEEDS` with P(decided) ≥ :data:`TARGET`. **Cost**:
the extra runs Σ_cells (n_claim − n_configured) × the projected GPU-hours of one seed of the cell (its
training and encoding jobs in the plan, :mod:`contrastlab.cost.plan`); a cell shared by several claims
is priced once, at the largest n they need.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.config import Grid, expanded_methods
from contrastlab.cost.flops import AS_CONFIGURED
from contrastlab.cost.plan import PlannedJob
from contrastlab.paths import Results
from contrastlab.report.claims import cell_of, evaluate_claim, own_groups, pairing
from contrastlab.report.control import (
    checkable,
    claim_metrics,
    control_config,
    published_cells,
    published_metrics,
    text_cells,
)
from contrastlab.report.parts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, UNDECIDED, ours_backbone
from contrastlab.stats import LEVEL, haircut, holm_rejections, one_sided_p, satterthwaite, t_quantile
from contrastlab.tables.assemble import experiment_seeds
from contrastlab.tables.metrics import PRETRAINED, collect_metrics
from contrastlab.tables.verdicts import cell_stratum, noise_pools, stand_ins

#: P(decided) a claim needs to count as decidable.
TARGET = 0.9
#: The largest seeds per cell the search tries (n = 2 … MAX_SEEDS).
MAX_SEEDS = 10
#: Replicates per (claim, n): the Monte-Carlo standard error of P near 0.9 is sqrt(0.09 / R) ≈ 0.01.
REPLICATES = 1000
#: The claims the issue asks the plan to price: "the GPU-hours to make ≥ 35 of the claims decidable".
GOAL = 35
#: Why a ``figure_values`` claim is not simulated (:func:`claim_structure`): counted apart in the plan.
FIGURE_READING = "a figure reading: no seed noise to simulate"

#: Seed std σ per metric (score points), the noise a perfect reproduction is drawn with, until measured
#: pools replace it (the runs' own seeds under results_dir, :func:`measured_noise`). None of the
#: four papers prints a seed std for these metrics (Nie and Li average three runs, MACL and OAR state no
#: runs; their ± are for graph tasks outside our scope), so these are the claims audit's stated
#: assumptions (claims-audit.md §1.2, "illustrative, not measured"): the order of the spread SimCSE-style
#: runs show across seeds for the STS average (about half a point), half that for the transfer average
#: (seven logistic-regression probes average out more), a single task twice its average's; CIFAR linear
#: and kNN accuracy of a fixed recipe 0.2; OAR's FFN accuracy after a short labelled fine-tune 1.0.
NOISE_PRIOR: dict[str, tuple[float, str]] = {
    "sts_avg": (0.5, "STS.Avg, audit §1.2 (SimCSE-style seed spread, assumed)"),
    "tr_avg": (0.25, "TR.Avg, audit §1.2 (assumed)"),
    "tr_devacc_avg": (0.25, "TR.Avg (dev accuracies), audit §1.2 (assumed)"),
    "sts_task": (1.0, "one STS task, audit §1.2 (assumed)"),
    "tr_task": (0.5, "one transfer task, audit §1.2 (assumed)"),
    "linear_top1": (0.2, "CIFAR linear probe, audit §1.2 (assumed)"),
    "knn_top1": (0.2, "CIFAR kNN, audit §1.2 (assumed)"),
    "ffn": (1.0, "OAR FFN accuracy, audit §1.2 (assumed)"),
}
STS_TASK_KEYS = {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"}
TR_TASK_KEYS = {"MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"}


def noise_prior(task: str) -> float:
    """σ of one seed on ``task`` (:data:`NOISE_PRIOR`); ``KeyError`` for a metric with no prior."""
    if task in NOISE_PRIOR:
        return NOISE_PRIOR[task][0]
    if task in STS_TASK_KEYS:
        return NOISE_PRIOR["sts_task"][0]
    if task in TR_TASK_KEYS:
        return NOISE_PRIOR["tr_task"][0]
    if task.startswith("ffn"):
        return NOISE_PRIOR["ffn"][0]
    raise KeyError(task)


# ------------------------------------------------------------------------------------- the structure
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
    level: float = LEVEL
    #: (P,) how each part is paired at n ≥ 2: UNPAIRED, BLOCKED or OWN (None: BLOCKED where the
    #: coefficients sum to 0 in each pool and no term is deterministic, else UNPAIRED)
    mode: np.ndarray | None = None
    #: (P,) the pool of an OWN part's per-seed contrasts (claims.own_groups), −1 for the others
    own_pool: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.mode is None:
            sums = np.zeros((len(self.coef), len(self.pool_cells)))
            for i, q in enumerate(self.pool):
                sums[:, q] += self.coef[:, i]
            cancels = np.all(np.abs(sums) < 1e-9, axis=1) & ~self.deterministic
            self.mode = np.where(cancels, BLOCKED, UNPAIRED)
        if self.own_pool is None:
            self.own_pool = np.where(self.mode == OWN, np.arange(len(self.coef)), -1)


#: How a part is paired (:func:`~contrastlab.report.claims.pairing`).
UNPAIRED, BLOCKED, OWN = 0, 1, 2


def claim_structure(
    claim: dict[str, Any],
    config: Mapping[str, Any],
    grid: Grid,
    cache: dict | None = None,
    measured: Mapping[tuple[str, str, str, str], float] | None = None,
) -> Structure | str:
    """The claim's :class:`Structure` under ``config`` (``grid`` its grid; ``cache``: the control's
    frames per experiment, shared between claims; ``measured``: σ of the pools measured so far,
    :func:`measured_noise`, which replace the prior), or why it has none (a text): a claim on figures
    only, an experiment not in the config, a trend, or a metric without a prior."""
    name = claim["experiment"]
    if claim.get("relation") == "figure_values":
        return FIGURE_READING
    if not checkable(claim):
        return "figures only: the paper prints no numbers to simulate"
    experiment = (config.get("experiments") or {}).get(name)
    if experiment is None:
        return f"experiment {name} not in the config"
    if claim.get("relation") == "trend":
        return "a trend: not simulated"
    structure = _control(config, name, {} if cache is None else cache)
    text = text_cells(claim)  # numbers the paper prints in its text (a figure claim): they replace the cells'
    metrics = claim_metrics(claim, name) if text else structure["metrics"]
    result = evaluate_claim(claim, metrics, structure["grid"])
    values = {**structure["values"], **text}
    ours_for = {paper: toy for toy, paper in stand_ins(config, name).items()}
    stratum_of = functools.partial(cell_stratum, grid, name)
    cells: list[tuple[str, str, str]] = []
    mu, coefs, fixed, det, certain, modes, own = [], [], [], [], 0, [], []
    for part in result.parts:
        if part.status == NOT_RUN:
            continue
        if not any(part.terms.values()):
            certain += 1
            continue
        row: dict[int, float] = {}
        const, has_det = 0.0, False
        for term, c in part.terms.items():
            method, task = cell_of(term, part.task)
            value = values[(part.backbone, method, task)]
            if method == PRETRAINED:
                const, has_det = const + c * value, True
                continue
            cell = (ours_backbone(part.backbone, experiment, ours_for), method, task)
            if cell not in cells:
                cells.append(cell)
                mu.append(value)
            row[cells.index(cell)] = row.get(cells.index(cell), 0.0) + c
        coefs.append(row)
        fixed.append(const)
        det.append(has_det)
        ours = ours_backbone(part.backbone, experiment, ours_for)
        how = None if has_det else pairing(part.terms, part.task, ours, stratum_of)
        modes.append({"blocked": BLOCKED, "own": OWN}.get(how, UNPAIRED))
        own.append((part.terms, part.task, ours))
    measured = measured or {}

    def sigma_of(backbone: str, method: str, task: str) -> float:
        key = (name, backbone, task, stratum_of(backbone, method))
        return measured[key] if key in measured else noise_prior(task)

    try:
        sigma = np.array([sigma_of(*cell) for cell in cells])
    except KeyError as error:
        return f"no noise prior for metric {error.args[0]}"
    coef = np.zeros((len(coefs), len(cells)))
    for j, row in enumerate(coefs):
        for i, c in row.items():
            coef[j, i] = c
    # pools: (backbone, task, stratum) of the config's grid, m = its methods on that backbone
    members: dict[tuple[str, str], list[str]] = {}
    for method in expanded_methods(experiment):
        for backbone in {b for b, _, _ in cells}:
            members.setdefault((backbone, stratum_of(backbone, method)), []).append(method)
    keys: list[tuple[str, str, str]] = []
    pool = []
    for backbone, method, task in cells:
        key = (backbone, task, stratum_of(backbone, method))
        if key not in keys:
            keys.append(key)
        pool.append(keys.index(key))
    pool_cells = np.array([max(len(members.get((b, s), [])), 1) for b, _, s in keys])
    pool_sigma = sigma[[pool.index(q) for q in range(len(keys))]] if keys else np.zeros(0)
    mode = np.array(modes, dtype=int)
    own_pool = np.full(len(modes), -1)
    own_parts = np.flatnonzero(mode == OWN)
    for k, group in enumerate(own_groups([own[j] for j in own_parts], stratum_of)):
        own_pool[own_parts[group]] = k
    if not coefs and not certain:  # e.g. a preset whose backbones are not the paper's (no stand-in)
        return "its parts do not resolve in this config's grid"
    relation = claim.get("relation", ">")
    shift = -float(claim["noninferiority_margin"]) if relation == ">=" else float(claim.get("margin", 0.0))
    return Structure(
        claim=claim,
        experiment=name,
        cells=cells,
        mu=np.array(mu, dtype=float),
        sigma=sigma,
        pool=np.array(pool, dtype=int),
        pool_cells=pool_cells,
        pool_sigma=pool_sigma,
        coef=coef,
        fixed=np.array(fixed, dtype=float),
        deterministic=np.array(det, dtype=bool),
        certain_nr=certain,
        shift=shift,
        expected=NOT_REPRODUCED if claim.get("paper_tables") else REPRODUCED,
        seeds=len(experiment_seeds(config, name) or [1]),
        mode=mode,
        own_pool=own_pool,
    )


def _control(config: Mapping[str, Any], experiment: str, cache: dict) -> dict[str, Any]:
    """The control's metrics and grid of ``experiment`` (:mod:`contrastlab.report.control`: the
    claim's parts resolved on the papers' numbers) and its published cell values, once per ``cache``."""
    if experiment not in cache:
        cells = published_cells(experiment)
        cache[experiment] = dict(
            metrics=published_metrics(experiment),
            grid=Grid(control_config(dict(config), experiment)),
            values={
                (b, m, t): float(v)
                for b, m, t, v in cells[["backbone", "method", "task", "value"]].itertuples(index=False)
            },
        )
    return cache[experiment]


# ---------------------------------------------------------------------------------------- simulation
VERDICT_CODES = (REPRODUCED, NOT_REPRODUCED, UNDECIDED)


def simulate(
    s: Structure, n: int, replicates: int, rng: np.random.Generator, mu: np.ndarray | None = None
) -> np.ndarray:
    """The verdicts (codes into :data:`VERDICT_CODES`) of ``replicates`` perfect reproductions of the
    claim with ``n`` seeds per cell (``mu``: other cell means, e.g. a claim's boundary); see the module
    docstring for the rule."""
    mean = s.mu if mu is None else mu
    R, C, P = replicates, len(s.cells), len(s.coef)
    x = mean[None, :, None] + s.sigma[None, :, None] * rng.standard_normal((R, C, n))
    xbar = x.mean(axis=2)
    delta = xbar @ s.coef.T + s.fixed[None, :] - s.shift  # (R, P)
    se = np.full((R, P), np.nan)
    df = np.zeros((R, P))
    mode = s.mode if n >= 2 else np.full(P, UNPAIRED)
    if n >= 2:
        s2_unpaired, df_unpaired, s2_blocked, df_blocked = _stratum_noise(s, x, xbar, rng)
        weight = np.zeros((P, len(s.pool_cells)))  # Σ_{i in g} c_ji² / n
        for i, q in enumerate(s.pool):
            weight[:, q] += s.coef[:, i] ** 2 / n
        for j in np.flatnonzero(mode != OWN):
            if not weight[j].any():  # deterministic cells only
                se[:, j], df[:, j] = 0.0, np.inf
                continue
            s2, nu = (s2_blocked, df_blocked) if mode[j] == BLOCKED else (s2_unpaired, df_unpaired)
            used = weight[j] > 0
            nu_j = nu[used]
            if mode[j] == UNPAIRED and used.sum() > 1:  # claims.py's conservative ν (stats.haircut)
                nu_j = haircut(nu_j)
            var, df[:, j] = satterthwaite(s2[:, used] * weight[j, used], nu_j)
            se[:, j] = np.sqrt(var)
        own = np.flatnonzero(mode == OWN)
        if len(own):
            per_seed = np.einsum("rcn,pc->rpn", x, s.coef[own])  # D_{j,s}
            ss = ((per_seed - per_seed.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)  # (R, own)
            for k in np.unique(s.own_pool[own]):
                members = s.own_pool[own] == k
                nu = int(members.sum()) * (n - 1)
                se[:, own[members]] = np.sqrt(ss[:, members].sum(axis=1) / nu / n)[:, None]
                df[:, own[members]] = nu
    else:  # one seed: no noise estimate, except for a part of deterministic cells only
        for j in np.flatnonzero(~s.coef.any(axis=1)):
            se[:, j], df[:, j] = 0.0, np.inf
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
    untested = status[:, ~tested]
    final = np.concatenate([fam_status, untested], axis=1)
    reproduced = (final == 0).sum(axis=1)
    contradicted = (final == 1).sum(axis=1)
    undecided = (final == 2).sum(axis=1)
    if s.claim.get("relation") == "count":
        need = int(s.claim["at_least"])
        verdict = np.where(reproduced >= need, 0, np.where(final.shape[1] - contradicted < need, 1, 2))
    else:
        verdict = np.where(contradicted > 0, 1, np.where(undecided > 0, 2, 0))
    return verdict


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
    """Cell means as close to the paper's as possible (least squares) with every part exactly at its
    claim's boundary, Δ_j = 0 (D_j = m, or −M for ``>=``): the least favourable truth for a false "not
    reproduced", where its rate is at most α = (1 − level) / 2 if the rule is calibrated. None when the
    parts cannot all sit there at once (or the claim has a part decided without noise)."""
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


# ------------------------------------------------------------------------------------- power and cost
@dataclass
class ClaimPower:
    """One claim's power: P(decided) at the configured seeds, the seeds per cell for P ≥ TARGET (None:
    not within MAX_SEEDS) and the extra GPU-hours of those seeds on its cells; ``why_not`` when the
    claim has no numbers to simulate."""

    claim: dict[str, Any]
    seeds: int = 0
    probability: float = math.nan
    seeds_needed: int | None = None
    probability_needed: float = math.nan
    cells: list[tuple[str, str, str]] = field(default_factory=list)  # (experiment, backbone, method)
    why_not: str = ""

    @property
    def decidable(self) -> bool:
        return not self.why_not and self.probability >= TARGET

    @property
    def figure_reading(self) -> bool:
        """A ``figure_values`` claim: one run per point, no seed noise; outside the plan's count."""
        return self.why_not == FIGURE_READING


def seed_hours(jobs: Sequence[PlannedJob], config: Mapping[str, Any]) -> dict[tuple[str, str, str], float]:
    """(experiment, backbone, method) -> projected GPU-hours of one seed (its training and encoding
    jobs, as configured, averaged over the configured seeds); a sweep point is also priced under its
    configured method's name, at its points' mean (``@best`` adds seeds to one point)."""
    per: dict[tuple[str, str, str], list[float]] = {}
    seeds: dict[tuple[str, str, str], set[str]] = {}
    for job in jobs:
        if job.rule not in ("train", "train_vision", "encode", "encode_vision"):
            continue
        experiment, backbone, method, seed = job.cell.split("/")
        key = (experiment, backbone, method)
        per.setdefault(key, []).append(job.seconds[AS_CONFIGURED] / 3600)
        seeds.setdefault(key, set()).add(seed)
    out = {key: sum(h) / len(seeds[key]) for key, h in per.items()}
    base: dict[tuple[str, str, str], list[float]] = {}
    for (experiment, backbone, method), hours in out.items():
        points = expanded_methods((config.get("experiments") or {}).get(experiment) or {"methods": {}})
        configured = points.get(method, (method, {}))[0]
        base.setdefault((experiment, backbone, configured), []).append(hours)
    for key, hours in base.items():
        out.setdefault(key, sum(hours) / len(hours))
    return out


#: Degrees of freedom a measured pool needs before its σ replaces the prior (2: two cells of 2 seeds).
MEASURED_DF = 2


def measured_noise(metrics: pd.DataFrame, grid: Grid) -> dict[tuple[str, str, str, str], float]:
    """(experiment, backbone, task, stratum) -> the pooled seed std s_p of the runs in ``metrics``
    (:func:`~contrastlab.tables.verdicts.noise_pools` at the configured seeds), for the pools with
    ν ≥ :data:`MEASURED_DF`: what the runs measured replaces the prior."""
    out = {}
    for name in grid.config.get("experiments") or {}:
        if metrics.empty or not (metrics["experiment"] == name).any():
            continue
        pools = noise_pools(metrics, name, experiment_seeds(grid.config, name), grid)
        for b, t, stratum, std, df in pools[
            ["backbone", "key", "stratum", "noise_std", "noise_df"]
        ].itertuples(index=False):
            if df >= MEASURED_DF:
                out[(name, b, t, stratum)] = float(std)
    return out


def claims_power(
    config: Mapping[str, Any],
    grid: Grid | None = None,
    replicates: int = REPLICATES,
    measured: Mapping[tuple[str, str, str, str], float] | None = None,
) -> list[ClaimPower]:
    """Every claim's :class:`ClaimPower` under ``config`` (:func:`~.claims.all_claims`; ``measured``:
    :func:`measured_noise`, replacing the prior where the runs measured a pool)."""
    from contrastlab.report.claims import all_claims

    grid = grid or Grid(config)
    out, cache = [], {}
    for claim in all_claims():
        s = claim_structure(claim, config, grid, cache, measured)
        if isinstance(s, str):
            out.append(ClaimPower(claim, why_not=s))
            continue
        out.append(claim_power(claim, s, replicates))
    return out


def claim_power(claim: dict[str, Any], s: Structure, replicates: int = REPLICATES) -> ClaimPower:
    """One claim's :class:`ClaimPower` from its :class:`Structure`: P(decided) at its configured seeds
    and, when below :data:`TARGET`, the smallest n ≤ :data:`MAX_SEEDS` that reaches it."""
    power = ClaimPower(claim, seeds=s.seeds, cells=sorted({(s.experiment, b, m) for b, m, _ in s.cells}))
    power.probability = decided_probability(s, s.seeds, replicates)
    if power.probability >= TARGET:
        power.seeds_needed, power.probability_needed = s.seeds, power.probability
        return power
    for n in range(max(2, s.seeds + 1), MAX_SEEDS + 1):
        prob = decided_probability(s, n, replicates)
        if prob >= TARGET:
            power.seeds_needed, power.probability_needed = n, prob
            break
    return power


def extra_hours(
    chosen: Sequence[ClaimPower], hours: Mapping[tuple[str, str, str], float]
) -> tuple[float, int]:
    """(GPU-hours, extra seed runs) that bring every cell of ``chosen`` to the largest seeds_needed of
    the chosen claims that use it."""
    target: dict[tuple[str, str, str], tuple[int, int]] = {}
    for power in chosen:
        for cell in power.cells:
            have, want = target.get(cell, (power.seeds, power.seeds))
            target[cell] = (have, max(want, power.seeds_needed or have))
    runs = {cell: want - have for cell, (have, want) in target.items() if want > have}
    return sum(n * hours.get(cell, 0.0) for cell, n in runs.items()), sum(runs.values())


def cheapest_to(
    goal: int, powers: Sequence[ClaimPower], hours: Mapping
) -> tuple[list[ClaimPower], float] | None:
    """The claims to add seeds to so that ``goal`` claims are decidable, chosen greedily (each step the
    claim with the fewest extra GPU-hours given the cells already raised), and their GPU-hours; None
    when fewer than ``goal`` can be made decidable within :data:`MAX_SEEDS`."""
    decided = [p for p in powers if p.decidable]
    candidates = [p for p in powers if not p.decidable and p.seeds_needed]
    if len(decided) + len(candidates) < goal:
        return None
    chosen: list[ClaimPower] = []
    while len(decided) + len(chosen) < goal:
        base = extra_hours(chosen, hours)[0]
        best = min(candidates, key=lambda p: extra_hours([*chosen, p], hours)[0] - base)
        chosen.append(best)
        candidates.remove(best)
    return chosen, extra_hours(chosen, hours)[0]


FAILED_BY_PAPER = "the paper's tables fail it: decided = not reproduced"


def power_lines(grid: Grid, jobs: Sequence[PlannedJob], replicates: int = REPLICATES) -> list[str]:
    """The plan's claims section (Markdown): the summary lines, then one row per claim."""
    from contrastlab.tables.markdown import markdown_table

    # the runs' own pools where they exist (a second `make plan` after some runs), else the prior
    metrics = collect_metrics(Results(grid.config.get("results_dir", "results")).metrics())
    measured = measured_noise(metrics, grid)
    every = claims_power(grid.config, grid, replicates, measured)
    readings = [p for p in every if p.figure_reading]
    powers = [p for p in every if not p.figure_reading]
    replaced = f"; replaced by the runs' own pooled σ in {len(measured)} pools" if measured else ""
    hours = seed_hours(jobs, grid.config)
    total, decidable = len(powers), sum(p.decidable for p in powers)
    reachable = [p for p in powers if p.decidable or p.seeds_needed]
    more = [p for p in powers if not p.decidable and p.seeds_needed]
    more_hours, more_runs = extra_hours(more, hours)
    more_cells = len({c for p in more for c in p.cells})
    lines = [
        "### Claims: would a perfect reproduction decide them?",
        "",
        f"A perfect reproduction: every cell at the paper's own number, each seed drawn around it with the "
        f"seed noise σ of its metric (a stated prior, not measured: STS.Avg 0.5, TR.Avg 0.25, one STS task "
        f"1.0, one transfer task 0.5, CIFAR linear and kNN 0.2, OAR FFN 1.0; `contrastlab.report.power`"
        f"{replaced}). "
        f"Decidable: it reads its expected verdict with P ≥ {TARGET} ({replicates} draws per claim and seed "
        "count, through the claims' own decision rule). "
        f"Not counted below: {len(readings)} figure readings (no seed noise to simulate: a "
        "regenerated figure's values against the paper's bound, one run per point).",
        "",
        f"**Decidable at the configured seeds: {decidable} of {total}; with {more_runs} more seed runs on "
        f"{more_cells} cells (up to {MAX_SEEDS} seeds per cell): {len(reachable)} of {total}, "
        f"+{more_hours:,.0f} GPU-hours.**",
        "",
    ]
    goal = cheapest_to(GOAL, powers, hours)
    if goal is None:
        lines.append(
            f"**≥ {GOAL} of {total} decidable: not reachable with up to {MAX_SEEDS} seeds per cell** "
            f"(at most {len(reachable)}; {sum(bool(p.why_not) for p in powers)} claims have no numbers "
            "to simulate)."
        )
    else:
        chosen, cost = goal
        lines.append(
            f"**≥ {GOAL} of {total} decidable: +{cost:,.0f} GPU-hours** (seeds added to the cells of "
            f"{len(chosen)} claims, cheapest first)."
        )
    lines.append("")
    rows = []
    for p in every:
        extra = extra_hours([p], hours)[0] if p.seeds_needed and not p.decidable else 0.0
        rows.append(
            {
                "claim": p.claim["id"],
                "seeds": str(p.seeds) if p.seeds else "—",
                "P(decided)": "—" if p.why_not else f"{p.probability:.2f}",
                "seeds for P ≥ 0.9": "—"
                if p.why_not
                else (str(p.seeds_needed) if p.seeds_needed else f"> {MAX_SEEDS}"),
                "+GPU-h": f"{extra:,.1f}" if extra else "",
                "note": p.why_not or (FAILED_BY_PAPER if p.claim.get("paper_tables") else ""),
            }
        )
    lines += markdown_table(rows, numeric_after_first=True) + [""]
    return lines


def power_note(power: ClaimPower, hours: Mapping[tuple[str, str, str], float]) -> str:
    """The report's note beside a claim the configured seeds cannot decide (issue 44): "undecided at the
    configured seeds; P(decided) = 0.58 at 3 seeds; needs 7 seeds per cell for ≥ 0.9 = +22.1 GPU-hours",
    or why no such number exists (a trend, figures only)."""
    if power.why_not:
        return f"no power estimate: {power.why_not}"
    head = f"P(decided) = {power.probability:.2f} at {power.seeds} seed{'s' if power.seeds > 1 else ''}"
    if power.decidable:
        return f"{head}: decidable at the configured seeds"
    if power.seeds_needed is None:
        return (
            f"undecided at the configured seeds; {head}; not decidable (P ≥ {TARGET}) within "
            f"{MAX_SEEDS} seeds per cell"
        )
    extra = extra_hours([power], hours)[0]
    cost = f"+{extra:,.1f}" if extra >= 0.05 else "< 0.1"
    return (
        f"undecided at the configured seeds; {head}; needs {power.seeds_needed} seeds per cell for "
        f"≥ {TARGET} = {cost} GPU-hours"
    )


def power_notes(
    claim_ids: Sequence[str], grid: Grid, metrics: pd.DataFrame, jobs: Sequence[PlannedJob] | None
) -> dict[str, str]:
    """claim id -> :func:`power_note` for the claims ``claim_ids`` (the report's undecided ones), with
    the runs' own pooled noise where measured (:func:`measured_noise`) and GPU-hours from the plan's
    ``jobs`` (None: no projection, the hours read 0)."""
    from contrastlab.report.claims import all_claims

    wanted = set(claim_ids)
    if not wanted:
        return {}
    measured = measured_noise(metrics, grid)
    hours = seed_hours(jobs or [], grid.config)
    out, cache = {}, {}
    for claim in all_claims():
        if claim["id"] not in wanted:
            continue
        s = claim_structure(claim, grid.config, grid, cache, measured)
        if isinstance(s, str):
            out[claim["id"]] = power_note(ClaimPower(claim, why_not=s), hours)
            continue
        out[claim["id"]] = power_note(claim_power(claim, s), hours)
    return out


def power_seed_plan(powers: Sequence[ClaimPower], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What ``make add-seeds TARGET=power`` runs: the seeds the plan's claims section says are needed
    (its "with K more seed runs on N cells" line): every cell of each claim that is not decidable at the
    configured seeds but is within :data:`MAX_SEEDS` brought to the largest ``seeds_needed`` of those
    claims that use it (:func:`extra_hours`' rule), as :func:`~contrastlab.report.claims.seed_plan`'s
    steps (experiment, backbone, methods, seeds, new), one step per (experiment, backbone, seed count).
    A sweep point's configured name (``@best``: its best rate is not known before the run) selects
    every point of its sweep."""
    target: dict[tuple[str, str, str], int] = {}
    for power in powers:
        if power.decidable or not power.seeds_needed:
            continue
        for cell in power.cells:
            target[cell] = max(target.get(cell, 0), power.seeds_needed)
    steps: dict[tuple[str, str, int], list[str]] = {}
    for (experiment, backbone, method), n in sorted(target.items()):
        steps.setdefault((experiment, backbone, n), []).append(method)
    plan = []
    for (experiment, backbone, n), methods in steps.items():
        seeds = list(experiment_seeds(config, experiment) or [])
        extra = list(range(max(seeds) + 1, max(seeds) + 1 + n - len(seeds)))
        if extra:
            plan.append(
                dict(
                    experiment=experiment, backbone=backbone, methods=methods, seeds=seeds + extra, new=extra
                )
            )
    return plan
