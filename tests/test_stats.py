"""contrastlab.stats: every statistic by hand, against printed t quantiles rather than scipy's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contrastlab.stats import (
    blocked_pooled_std,
    contrast_variance,
    fit_slope,
    half_width,
    holm_rejections,
    one_sided_p,
    pooled_std,
    seeds_needed,
)

# Student t quantiles t_{df, 0.975} from a printed table (not from scipy).
T975 = {2: 4.302652729911275, 3: 3.182446305284263, 4: 2.7764451051977987}


def test_pooled_std_by_hand():
    # cell A: 70, 71, 72 (mean 71, SS 2); cell B: 75, 77 (mean 76, SS 2); cell C: one seed (adds nothing)
    std, df = pooled_std([[70.0, 71.0, 72.0], [75.0, 77.0], [80.0]])
    assert df == 3
    assert std == pytest.approx(math.sqrt(4 / 3), abs=1e-12)
    assert pooled_std([[80.0], [81.0]]) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_seed_blocked_pool_by_hand():
    # cells × seeds = seed effect (70, 71, 72) + cell means (0, 2, 4, 4.46) + residuals r that sum to 0
    # over every cell and every seed: a (0.3, −0.3, 0), b (−0.3, 0.3, 0), c and d 0. The fit returns r:
    # SS 4 · 0.09 = 0.36 over ν = (4 − 1)(3 − 1) = 6, s² = 0.06
    base, r = [70.0, 71.0, 72.0], {0: [0.3, -0.3, 0.0], 1: [-0.3, 0.3, 0.0]}
    cells = [
        {42 + s: base[s] + gap + r.get(i, [0.0] * 3)[s] for s in range(3)}
        for i, gap in enumerate((0.0, 2.0, 4.0, 4.46))
    ]
    std, df = blocked_pooled_std(cells)
    assert df == 6 and std**2 == pytest.approx(0.06, rel=1e-9)
    # the same six pairs' per-seed contrasts pooled as independent parts: Σ SS = 4 · 0.36 = 1.44 over
    # 6 · 2 = 12, s_D² = 0.12 = 2 s²: the same estimate, twice the degrees of freedom it has
    ss = sum(
        sum((d - sum(ds) / 3) ** 2 for d in ds)
        for i in range(4)
        for j in range(i + 1, 4)
        for ds in [[cells[i][k] - cells[j][k] for k in (42, 43, 44)]]
    )
    assert ss / 12 == pytest.approx(2 * std**2, rel=1e-9)
    # a seed missing from one cell: N 11, rank 4 + 3 − 1 = 6, ν 5; a one-seed cell adds nothing
    del cells[3][44]
    assert blocked_pooled_std(cells)[1] == 5
    assert blocked_pooled_std([{42: 1.0, 43: 2.0}, {42: 5.0}]) == (pytest.approx(math.nan, nan_ok=True), 0)
    assert blocked_pooled_std([{42: 1.0, 43: 2.0}])[1] == 0  # one cell: its seeds are the seed effect


def test_half_width_by_hand():
    std = math.sqrt(4 / 3)
    # ours over 3 seeds against a single published run; against a published mean of 3 runs
    assert half_width(std, 3, n=3, k=1) == pytest.approx(T975[3] * std * math.sqrt(1 / 3 + 1), rel=1e-9)
    assert half_width(std, 3, n=3, k=3) == pytest.approx(T975[3] * std * math.sqrt(2 / 3), rel=1e-9)
    assert half_width(std, 3, n=3, k=None) == pytest.approx(T975[3] * std / math.sqrt(3), rel=1e-9)
    assert math.isnan(half_width(std, 0, n=3, k=1))


def test_distinct_pools_are_combined_by_satterthwaite():
    # pool a: two terms, V_a = 2² (0.1 + 0.15) = 1, ν 4; pool b: V_b = 1, ν 6
    # ν = (1 + 1)² / (1/4 + 1/6) = 4 / (5/12) = 9.6
    var, df = contrast_variance([("a", 0.1, 2.0, 4), ("b", 0.25, 2.0, 6), ("a", 0.15, 2.0, 4)])
    assert var == pytest.approx(2.0, rel=1e-12) and df == pytest.approx(9.6, rel=1e-12)
    assert contrast_variance([]) == (0.0, math.inf)
    assert math.isnan(contrast_variance([("a", 0.5, 1.0, 4), ("b", 0.5, math.nan, 0)])[0])


def test_the_conservative_rule_takes_two_degrees_off_each_pool():
    # the same two pools on ν − 2: (1 + 1)² / (1/2 + 1/4) = 4 / 0.75 = 5.33 (not 9.6); one pool keeps ν
    var, df = contrast_variance(
        [("a", 0.1, 2.0, 4), ("b", 0.25, 2.0, 6), ("a", 0.15, 2.0, 4)], conservative=True
    )
    assert var == pytest.approx(2.0, rel=1e-12) and df == pytest.approx(16 / 3, rel=1e-12)
    assert contrast_variance([("a", 0.5, 1.0, 4)], conservative=True) == (0.5, 4.0)
    assert contrast_variance([("a", 0.5, 1.0, 2), ("b", 0.5, 1.0, 2)], conservative=True) == (1.0, 2.0)


def test_holm_step_down_by_hand():
    # α = 0.05 over 4: sorted 0.005 < 0.05/4, 0.01 < 0.05/3, 0.03 ≥ 0.05/2: stop (0.04 is not reached)
    assert holm_rejections([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert holm_rejections([0.02], 0.025) == [True] and holm_rejections([], 0.025) == []
    assert holm_rejections([0.05, 0.025], 0.05) == [False, False]  # strict: p_(1) = α/2 stops at once


def test_seeds_needed_and_the_noiseless_p_value_at_their_edges():
    # t_4 · sqrt(1/n) < 1 first at n = 8 (2.776 / sqrt(7) = 1.049, / sqrt(8) = 0.982): found with most = 8
    assert seeds_needed(1.0, 1.0, 1.0, lambda n: 4, 2, most=8) == 8
    assert seeds_needed(1.0, 1.0, 1.0, lambda n: 4, 2, most=7) is None
    # no noise: Δ = 0 is no contradiction (p = 1), in the scalar form as in the array form
    assert one_sided_p(0.0, 0.0, 3) == 1.0 == one_sided_p(np.zeros(1), np.zeros(1), 3)[0]


def test_slope_and_its_residual_noise_by_hand():
    # x 0..3, y 1 2 4 5: x̄ 1.5, ȳ 3, S_xx 5, S_xy 7, b 1.4; residuals 0.1 −0.3 0.3 −0.1 (SS 0.2), s² 0.1
    fit = fit_slope([0, 1, 2, 3], [1, 2, 4, 5])
    assert fit.slope == pytest.approx(1.4) and fit.df == 2 and fit.s == pytest.approx(math.sqrt(0.1))
    assert fit.se == pytest.approx(math.sqrt(0.1 / 5)) and fit.rho == pytest.approx(1.0)
    # two seeds per point: N 8, ν 6, S_xx doubles
    twice = fit_slope([0, 0, 1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 4, 4, 5, 5])
    assert twice.slope == pytest.approx(1.4) and twice.df == 6
    assert twice.se == pytest.approx(math.sqrt((0.4 / 6) / 10))
    assert fit_slope([0, 1], [1, 2]).df == 0 and fit_slope([0, 1], [1, 2]).slope == pytest.approx(1.0)
    assert fit_slope([1, 1, 1], [1, 2, 3]).df == 0
