"""Power before the run: the chance that a *perfect* reproduction decides each claim at the configured
seeds, the seeds per cell it needs to decide it, and what those seeds cost (``make plan``'s claims section).

A perfect reproduction has the paper's numbers as its cell means (the control's cells) and seed noise
σ_i from :data:`NOISE_PRIOR`; **P(decided)** is the chance its verdict is the expected one (reproduced,
or not reproduced for a ``paper_tables`` claim), estimated by :mod:`contrastlab.report.simulation` on
the claim's :func:`claim_structure`. **Seeds needed**: the configured n if it reaches :data:`TARGET`,
else the smallest n above it up to :data:`MAX_SEEDS` that does. **Cost**: the extra runs × the projected
GPU-hours of one seed of each cell (:mod:`contrastlab.cost.plan`), a cell shared by several claims priced
once at the largest n.
``@best`` is the paper's printed best cell (the winner's curse is not simulated); trend and
``figure_values`` claims are not simulated and are counted apart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.blocks import Heading, Paragraph, rows_table
from contrastlab.config import Grid, expanded_methods
from contrastlab.cost.flops import AS_CONFIGURED
from contrastlab.cost.plan import PlannedJob
from contrastlab.report.claims import all_claims, evaluate_claim, seed_steps
from contrastlab.report.contrasts import cell_of, own_groups, pairing
from contrastlab.report.control import (
    checkable,
    claim_metrics,
    control_grid,
    published_cells,
    published_metrics,
    text_cells,
)
from contrastlab.report.parts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, PartResult
from contrastlab.report.simulation import BLOCKED, OWN, REPLICATES, UNPAIRED, Structure, decided_probability
from contrastlab.senteval.protocol import STS_TASKS, TRANSFER_TASKS
from contrastlab.tables.metrics import PRETRAINED, collect_metrics
from contrastlab.tables.verdicts import cell_stratum, noise_pools

#: P(decided) a claim needs to count as decidable.
TARGET = 0.9
#: The largest seeds per cell the search tries (n = 2 … MAX_SEEDS).
MAX_SEEDS = 10
#: The claims the issue asks the plan to price: "the GPU-hours to make ≥ 35 of the claims decidable".
GOAL = 35
#: Why a ``figure_values`` claim is not simulated (:func:`claim_structure`): counted apart in the plan.
FIGURE_READING = "a figure reading: no seed noise to simulate"

#: Seed std σ per metric (score points) a perfect reproduction is drawn with, until the runs' own pools
#: replace it (:func:`measured_noise`). None of the papers prints one, so these are stated assumptions,
#: "illustrative, not measured": about half a point for SimCSE-style STS averages, half that for the
#: transfer average, a single task twice its average's; CIFAR linear and kNN 0.2; OAR's FFN 1.0.
NOISE_PRIOR = {
    "sts_avg": 0.5,
    "tr_avg": 0.25,
    "tr_devacc_avg": 0.25,  # TR.Avg of the dev accuracies
    "sts_task": 1.0,  # one STS task
    "tr_task": 0.5,  # one transfer task
    "linear_top1": 0.2,
    "knn_top1": 0.2,
    "ffn": 1.0,  # OAR's FFN accuracy, any label fraction
}


def noise_prior(task: str) -> float:
    """σ of one seed on ``task`` (:data:`NOISE_PRIOR`); ``KeyError`` for a metric with no prior."""
    if task in NOISE_PRIOR:
        return NOISE_PRIOR[task]
    if task in STS_TASKS:
        return NOISE_PRIOR["sts_task"]
    if task in TRANSFER_TASKS:
        return NOISE_PRIOR["tr_task"]
    if task.startswith("ffn"):
        return NOISE_PRIOR["ffn"]
    raise KeyError(task)


def claim_structure(
    claim: dict[str, Any],
    grid: Grid,
    cache: dict | None = None,
    measured: Mapping[tuple[str, str, str, str], float] | None = None,
) -> Structure | str:
    """The claim's :class:`Structure` under ``grid``'s config, or why it has none (a text). ``cache``: the
    control's frames per experiment, shared between claims; ``measured``: pools' σ that replace the prior."""
    name = claim["experiment"]
    exp = grid.experiment(name)
    if why_not := _not_simulated(claim, exp.spec if exp.configured else None):
        return why_not
    control = _control(grid, name, {} if cache is None else cache)
    text = text_cells(claim)  # numbers the paper prints in its text (a figure claim): they replace the cells'
    metrics = claim_metrics(claim, name) if text else control["metrics"]
    result = evaluate_claim(claim, metrics, control["grid"])
    stratum_of = functools.partial(cell_stratum, grid, name)
    rows = _part_rows(result.parts, {**control["values"], **text}, exp.ours, stratum_of)
    measured = measured or {}
    try:  # each cell's σ: its pool's as the runs measured it (measured_noise), else its metric's prior
        pool_keys = [(name, b, task, stratum_of(b, method)) for b, method, task in rows.cells]
        sigma = np.array([measured[key] if key in measured else noise_prior(key[2]) for key in pool_keys])
    except KeyError as error:
        return f"no noise prior for metric {error.args[0]}"
    pool, pool_cells, pool_sigma = _pools(rows.cells, sigma, exp.spec, stratum_of)
    mode, own_pool = _own_pools(rows.modes, rows.own, stratum_of)
    if not rows.coefs and not rows.certain:  # e.g. a preset whose backbones are not the paper's (no stand-in)
        return "its parts do not resolve in this config's grid"
    relation = claim.get("relation", ">")
    shift = -float(claim["noninferiority_margin"]) if relation == ">=" else float(claim.get("margin", 0.0))
    return Structure(
        claim=claim,
        experiment=name,
        cells=rows.cells,
        mu=np.array(rows.mu, dtype=float),
        sigma=sigma,
        pool=pool,
        pool_cells=pool_cells,
        pool_sigma=pool_sigma,
        coef=rows.coef_matrix(),
        fixed=np.array(rows.fixed, dtype=float),
        deterministic=np.array(rows.det, dtype=bool),
        certain_nr=rows.certain,
        shift=shift,
        expected=NOT_REPRODUCED if claim.get("paper_tables") else REPRODUCED,
        seeds=len(exp.seeds or [1]),
        mode=mode,
        own_pool=own_pool,
    )


def _not_simulated(claim: dict[str, Any], experiment: dict | None) -> str:
    """Why the claim has no numbers to simulate ("" when it has): a figure reading, a claim on figures
    only, its experiment not in the config (``experiment`` None), a trend."""
    if claim.get("relation") == "figure_values":
        return FIGURE_READING
    if not checkable(claim):
        return "figures only: the paper prints no numbers to simulate"
    if experiment is None:
        return f"experiment {claim['experiment']} not in the config"
    if claim.get("relation") == "trend":
        return "a trend: not simulated"
    return ""


@dataclass
class _PartRows:
    """A claim's run parts as the simulation's rows: its noisy cells and their means, each part's
    coefficients ({cell index: c}), deterministic terms' Σ c μ and whether it has one, its pairing and
    (terms, task, ours backbone), and the count of parts decided without noise."""

    cells: list[tuple[str, str, str]] = field(default_factory=list)
    mu: list[float] = field(default_factory=list)
    coefs: list[dict[int, float]] = field(default_factory=list)
    fixed: list[float] = field(default_factory=list)
    det: list[bool] = field(default_factory=list)
    modes: list[int] = field(default_factory=list)
    own: list[tuple[dict[str, float], str, str]] = field(default_factory=list)
    certain: int = 0

    def coef_matrix(self) -> np.ndarray:
        """The coefficients as a (parts, cells) matrix."""
        coef = np.zeros((len(self.coefs), len(self.cells)))
        for j, row in enumerate(self.coefs):
            coef[j, list(row)] = list(row.values())
        return coef


def _part_rows(
    parts: Sequence[PartResult],
    values: Mapping[tuple[str, str, str], float],
    ours_of: Callable[[str], str],
    stratum_of: Callable[[str, str], str],
) -> _PartRows:
    """The run ``parts`` of one evaluation on the papers' numbers (``values``: (backbone, method, task) ->
    its number) as :class:`_PartRows`; ``ours_of``: the backbone whose cells stand for a paper's."""
    rows = _PartRows()
    for part in parts:
        if part.status == NOT_RUN:
            continue
        if not any(part.terms.values()):
            rows.certain += 1
            continue
        ours = ours_of(part.backbone)
        row: dict[int, float] = {}
        const, has_det = 0.0, False
        for term, c in part.terms.items():
            method, task = cell_of(term, part.task)
            value = values[(part.backbone, method, task)]
            if method == PRETRAINED:
                const, has_det = const + c * value, True
                continue
            cell = (ours, method, task)
            if cell not in rows.cells:
                rows.cells.append(cell)
                rows.mu.append(value)
            row[rows.cells.index(cell)] = row.get(rows.cells.index(cell), 0.0) + c
        rows.coefs.append(row)
        rows.fixed.append(const)
        rows.det.append(has_det)
        how = None if has_det else pairing(part.terms, part.task, ours, stratum_of)
        rows.modes.append({"blocked": BLOCKED, "own": OWN}.get(how, UNPAIRED))
        rows.own.append((part.terms, part.task, ours))
    return rows


def _pools(
    cells: list[tuple[str, str, str]],
    sigma: np.ndarray,
    experiment: dict,
    stratum_of: Callable[[str, str], str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cells' pools, (backbone, task, stratum) of the config's grid: each cell's pool, each pool's
    trained cells m (its methods on that backbone, at least 1) and its σ (its first cell's)."""
    members: dict[tuple[str, str], list[str]] = {}
    for method in expanded_methods(experiment):
        for backbone in {b for b, _, _ in cells}:
            members.setdefault((backbone, stratum_of(backbone, method)), []).append(method)
    cell_keys = [(backbone, task, stratum_of(backbone, method)) for backbone, method, task in cells]
    keys = list(dict.fromkeys(cell_keys))
    pool = [keys.index(key) for key in cell_keys]
    pool_cells = np.array([max(len(members.get((b, s), [])), 1) for b, _, s in keys])
    pool_sigma = sigma[[pool.index(q) for q in range(len(keys))]] if keys else np.zeros(0)
    return np.array(pool, dtype=int), pool_cells, pool_sigma


def _own_pools(
    modes: list[int], own: list[tuple[dict[str, float], str, str]], stratum_of: Callable[[str, str], str]
) -> tuple[np.ndarray, np.ndarray]:
    """Each part's pairing as an array, and the pool of each part paired on its own contrasts
    (:func:`~contrastlab.report.contrasts.own_groups`; −1 for the others)."""
    mode = np.array(modes, dtype=int)
    own_pool = np.full(len(modes), -1)
    own_parts = np.flatnonzero(mode == OWN)
    for k, group in enumerate(own_groups([own[j] for j in own_parts], stratum_of)):
        own_pool[own_parts[group]] = k
    return mode, own_pool


def _control(grid: Grid, experiment: str, cache: dict) -> dict[str, Any]:
    """The control's metrics, grid (:func:`~contrastlab.report.control.control_grid`) and published cell
    values of ``experiment``, once per ``cache``."""
    if experiment not in cache:
        cells = published_cells(experiment).set_index(["backbone", "method", "task"])
        cache[experiment] = dict(
            metrics=published_metrics(experiment),
            grid=control_grid(grid, experiment),
            values=cells["value"].astype(float).to_dict(),
        )
    return cache[experiment]


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


def seed_hours(jobs: Sequence[PlannedJob], grid: Grid) -> dict[tuple[str, str, str], float]:
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
        points = expanded_methods(grid.experiment(experiment).spec or {"methods": {}})
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
    for name in grid.every_experiment:
        if metrics.empty or not (metrics["experiment"] == name).any():
            continue
        pools = noise_pools(metrics, name, grid.experiment(name).seeds, grid)
        for b, t, stratum, std, df in pools[
            ["backbone", "key", "stratum", "noise_std", "noise_df"]
        ].itertuples(index=False):
            if df >= MEASURED_DF:
                out[(name, b, t, stratum)] = float(std)
    return out


def claims_power(
    grid: Grid,
    replicates: int = REPLICATES,
    measured: Mapping[tuple[str, str, str, str], float] | None = None,
) -> list[ClaimPower]:
    """Every claim's :class:`ClaimPower` under ``grid``'s config (:func:`~.claims.all_claims`;
    ``measured``: :func:`measured_noise`, replacing the prior where the runs measured a pool)."""
    cache: dict = {}
    return [_claim_power(claim, grid, cache, measured, replicates) for claim in all_claims()]


def _claim_power(claim, grid, cache, measured, replicates: int = REPLICATES) -> ClaimPower:
    """:func:`claim_power` of ``claim``'s :func:`claim_structure`, or a :class:`ClaimPower` saying why it
    has none."""
    s = claim_structure(claim, grid, cache, measured)
    return ClaimPower(claim, why_not=s) if isinstance(s, str) else claim_power(claim, s, replicates)


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


def power_blocks(grid: Grid, jobs: Sequence[PlannedJob], replicates: int = REPLICATES) -> list:
    """The plan's claims section: the summary paragraphs, then one row per claim."""
    # the runs' own pools where they exist (a second `make plan` after some runs), else the prior
    metrics = collect_metrics(grid.results.metrics())
    measured = measured_noise(metrics, grid)
    every = claims_power(grid, replicates, measured)
    readings = [p for p in every if p.figure_reading]
    powers = [p for p in every if not p.figure_reading]
    replaced = f"; replaced by the runs' own pooled σ in {len(measured)} pools" if measured else ""
    hours = seed_hours(jobs, grid)
    total, decidable = len(powers), sum(p.decidable for p in powers)
    reachable = [p for p in powers if p.decidable or p.seeds_needed]
    more = [p for p in powers if not p.decidable and p.seeds_needed]
    more_hours, more_runs = extra_hours(more, hours)
    more_cells = len({c for p in more for c in p.cells})
    about = (
        f"A perfect reproduction: every cell at the paper's own number, each seed drawn around it with the "
        f"seed noise σ of its metric (a stated prior, not measured: STS.Avg 0.5, TR.Avg 0.25, one STS task "
        f"1.0, one transfer task 0.5, CIFAR linear and kNN 0.2, OAR FFN 1.0; `contrastlab.report.power`"
        f"{replaced}). "
        f"Decidable: it reads its expected verdict with P ≥ {TARGET} ({replicates} draws per claim and seed "
        "count, through the claims' own decision rule). "
        f"Not counted below: {len(readings)} figure readings (no seed noise to simulate: a "
        "regenerated figure's values against the paper's bound, one run per point)."
    )
    decided = (
        f"**Decidable at the configured seeds: {decidable} of {total}; with {more_runs} more seed runs on "
        f"{more_cells} cells (up to {MAX_SEEDS} seeds per cell): {len(reachable)} of {total}, "
        f"+{more_hours:,.0f} GPU-hours.**"
    )
    goal = cheapest_to(GOAL, powers, hours)
    if goal is None:
        reach = (
            f"**≥ {GOAL} of {total} decidable: not reachable with up to {MAX_SEEDS} seeds per cell** "
            f"(at most {len(reachable)}; {sum(bool(p.why_not) for p in powers)} claims have no numbers "
            "to simulate)."
        )
    else:
        chosen, cost = goal
        reach = (
            f"**≥ {GOAL} of {total} decidable: +{cost:,.0f} GPU-hours** (seeds added to the cells of "
            f"{len(chosen)} claims, cheapest first)."
        )
    return [
        Heading(3, "Claims: would a perfect reproduction decide them?"),
        *map(Paragraph, (about, decided, reach)),
        rows_table(_power_rows(every, hours), right=1),
    ]


def _power_rows(every: Sequence[ClaimPower], hours: Mapping[tuple[str, str, str], float]) -> list[dict]:
    """The claims section's table: one row per claim (its seeds, P(decided), the seeds for P ≥ 0.9 and
    their extra GPU-hours, or why it has no numbers)."""
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
    return rows


def power_note(power: ClaimPower, hours: Mapping[tuple[str, str, str], float]) -> str:
    """The report's note beside a claim the configured seeds cannot decide: "undecided at the
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
    """claim id -> :func:`power_note` for ``claim_ids``, with the runs' own pooled noise where measured
    and GPU-hours from the plan's ``jobs`` (None: no projection, the hours read 0)."""
    wanted = set(claim_ids)
    measured = measured_noise(metrics, grid)
    hours = seed_hours(jobs or [], grid)
    cache: dict = {}
    return {
        claim["id"]: power_note(_claim_power(claim, grid, cache, measured), hours)
        for claim in all_claims()
        if claim["id"] in wanted
    }


def power_seed_plan(powers: Sequence[ClaimPower], grid: Grid) -> list[dict[str, Any]]:
    """What ``make add-seeds TARGET=power`` runs: each cell of the claims not decidable at the configured
    seeds but within :data:`MAX_SEEDS`, brought to the most ``seeds_needed`` of its claims, as
    :func:`~.claims.seed_steps` (a sweep's ``@best`` selects every point of its sweep)."""
    target: dict[tuple[str, str, str], int] = {}
    for power in powers:
        if power.decidable or not power.seeds_needed:
            continue
        for cell in power.cells:
            target[cell] = max(target.get(cell, 0), power.seeds_needed)
    steps: dict[tuple[str, str, int], list[str]] = {}
    for (experiment, backbone, method), n in sorted(target.items()):
        steps.setdefault((experiment, backbone, n), []).append(method)
    return seed_steps(grid, steps)
