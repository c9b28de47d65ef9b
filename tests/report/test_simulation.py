"""The simulation of the claims' power (contrastlab.report.simulation): the Monte-Carlo decision rule
against closed forms from the noncentral t."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from contrastlab.report import simulation
from contrastlab.report.parts import REPRODUCED
from contrastlab.stats import LEVEL


def one_part(mu, sigma, *, fixed=0.0, deterministic=False, pool_cells=None, shift=0.0, seeds=3):
    """A one-part claim "a beats b" (or "a beats a deterministic number", ``deterministic``)."""
    cells = [("b0", m, "sts_avg") for m in ("a", "b")[: len(mu)]]
    coef = np.array([[1.0, -1.0][: len(mu)]])
    return simulation.Structure(
        claim={"id": "toy", "relation": ">"},
        experiment="toy",
        cells=cells,
        mu=np.array(mu, dtype=float),
        sigma=np.full(len(mu), sigma),
        pool=np.zeros(len(mu), dtype=int),
        pool_cells=np.array([pool_cells or len(mu)]),
        pool_sigma=np.array([sigma]),
        coef=coef,
        fixed=np.array([fixed]),
        deterministic=np.array([deterministic]),
        certain_nr=0,
        shift=shift,
        expected=REPRODUCED,
        seeds=seeds,
        mode=np.array([simulation.UNPAIRED if deterministic else simulation.BLOCKED]),
        own_pool=np.array([-1]),
    )


def reproduced_share(s, n, replicates=20_000, seed=1):
    codes = simulation.simulate(s, n, replicates, np.random.default_rng(seed))
    return float((codes == 0).mean()), float((codes == 1).mean())


@pytest.mark.parametrize(
    "n, gap, margin, pool",
    [
        (3, 1.0, 0.0, 2),
        (5, 0.8, 0.3, 2),
        (2, 2.5, 0.0, 2),
        (3, 0.9, 0.0, 2),
        (3, 0.9, 0.0, 6),
        (2, 0.9, 0.0, 12),
    ],
)
def test_a_paired_part_reproduces_with_the_noncentral_t_probability(n, gap, margin, pool):
    """Paired "a beats b" by a margin m within a stratum of ``pool`` trained cells, two of them the claim's:
    s_g² is the seed-blocked residual of all of them, ν = (C − 1)(n − 1) (the pair alone: D_s = x_a,s −
    x_b,s, std σ√2, ν = n − 1), se = s_g sqrt(2 / n), so T = (D̄ − m) / se is noncentral t with that ν and
    δ = (gap − m) / (σ sqrt(2 / n)) (the other cells drawn through their residual and seed profile only);
    reproduced when T > t_{ν, 0.975}, not reproduced (Holm with one part: p < α) when T < −t_{ν, 0.975}."""
    sigma = 0.5
    s = one_part([70.0 + gap, 70.0], sigma, shift=margin, pool_cells=pool)
    got_r, got_nr = reproduced_share(s, n)
    df, delta = (pool - 1) * (n - 1), (gap - margin) / (sigma * math.sqrt(2 / n))
    t = scipy.stats.t.ppf((1 + LEVEL) / 2, df)
    assert got_r == pytest.approx(scipy.stats.nct.sf(t, df, delta), abs=0.015)  # 4 MC standard errors
    assert got_nr == pytest.approx(scipy.stats.nct.cdf(-t, df, delta), abs=0.01)


@pytest.mark.parametrize("n, pool", [(3, 1), (3, 6), (2, 12)])
def test_an_unpaired_part_takes_its_pools_degrees_of_freedom(n, pool):
    """A part "a beats a deterministic number" (a Pretrained row): unpaired, se = s_p / √n with s_p
    pooled over the pool's m cells, ν = m (n − 1): T is noncentral t with ν and δ = gap / (σ / √n)."""
    sigma, gap = 1.0, 1.2
    s = one_part([60.0], sigma, fixed=-(60.0 - gap), deterministic=True, pool_cells=pool)
    got_r, _ = reproduced_share(s, n)
    df, delta = pool * (n - 1), gap / (sigma / math.sqrt(n))
    t = scipy.stats.t.ppf((1 + LEVEL) / 2, df)
    assert got_r == pytest.approx(scipy.stats.nct.sf(t, df, delta), abs=0.015)


def test_a_part_on_its_own_contrasts_and_a_cross_protocol_part():
    """``own`` (the same runs on two tasks: two pools, one protocol): ν = n − 1 from its own per-seed
    contrasts; the same cells across protocols: unpaired, each pool's ν = m (n − 1), combined by the
    conservative Welch–Satterthwaite over ν_p − 2 (equal pools: the test reads t at 2 (m (n − 1) − 2)
    while the statistic has the exact 2 m (n − 1))."""
    sigma, gap, n = 0.5, 0.9, 3
    for mode, df, cut in (
        (simulation.OWN, n - 1, n - 1),
        (simulation.UNPAIRED, 2 * 4 * (n - 1), 2 * (4 * (n - 1) - 2)),
    ):
        s = one_part([70.0 + gap, 70.0], sigma)
        s.pool, s.pool_cells, s.pool_sigma = np.array([0, 1]), np.array([4, 4]), np.array([sigma, sigma])
        s.mode, s.own_pool = np.array([mode]), np.array([0 if mode == simulation.OWN else -1])
        got_r, _ = reproduced_share(s, n)
        delta = gap / (sigma * math.sqrt(2 / n))
        t = scipy.stats.t.ppf((1 + LEVEL) / 2, cut)
        assert got_r == pytest.approx(scipy.stats.nct.sf(t, df, delta), abs=0.015), mode


def test_one_seed_never_decides_a_contrast():
    s = one_part([80.0, 60.0], 0.5, seeds=1)
    codes = simulation.simulate(s, 1, 200, np.random.default_rng(0))
    assert set(codes) == {2}  # undecided: no seed noise to measure


def test_a_count_claim_reads_reproduced_at_its_level():
    """5 of 7 where only 4 parts hold and 3 sit at the margin: counting each part at α read reproduced with
    chance 1 − 0.975³ ≈ 7.3 %; at α / 3, claims.py's count bar (Bonferroni's partial conjunction), ≤ α."""
    mu = np.repeat([50.0] * 4 + [0.0] * 3, 2) * np.tile([1, 0], 7)  # pairs (a_j, b_j), a_j − b_j = 50 or 0
    s = one_part([0.0, 0.0], 1.0)
    s.claim, s.cells = {"id": "c", "relation": "count", "at_least": 5}, list(range(14))
    s.mu, s.sigma = mu, np.ones(14)
    s.pool, s.pool_cells, s.pool_sigma = np.repeat(np.arange(7), 2), np.full(7, 2), np.ones(7)
    s.coef, s.fixed, s.deterministic = np.kron(np.eye(7), [1.0, -1.0]), np.zeros(7), np.zeros(7, dtype=bool)
    s.mode, s.own_pool = np.full(7, simulation.BLOCKED), np.full(7, -1)
    assert reproduced_share(s, 5)[0] < 0.03
