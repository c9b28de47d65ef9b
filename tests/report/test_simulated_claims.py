"""Li et al.'s simulated figures decided: each claim on Fig. 2/10, 3 and 4 on a small constructed grid
worked out by hand, with the Monte-Carlo error in use, and the simulation's standard errors checked."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest

from contrastlab.figures.li2024 import gd_monte_carlo, gradient_dissipation, hardest_negative_share
from contrastlab.report.claims import (
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    UNDECIDED,
    evaluate_claim,
    numbers_text,
)
from contrastlab.report.figure_values import mc_z
from tests.report.test_claims import claim
from tests.report.test_figure_values import grid as figures_grid
from tests.report.test_figure_values import write

grid = functools.partial(figures_grid, names=("li2024",))


def gd_rows(losses, close: float, close_se: float, far: float, far_se: float) -> pd.DataFrame:
    """Two pairs per loss: one close (gap 0.02) with mean GD ``close`` ± ``close_se``, one far (gap 1.6)
    with ``far`` ± ``far_se``, and one in between (gap 0.5, GD 0.5) that neither part reads."""
    rows = []
    for loss in losses:
        rows += [
            dict(loss=loss, mu_pos=0.5, mu_neg=0.52, gap=0.02, gd=close, gd_se=close_se),
            dict(loss=loss, mu_pos=0.5, mu_neg=1.0, gap=0.5, gd=0.5, gd_se=0.01),
            dict(loss=loss, mu_pos=0.2, mu_neg=1.8, gap=1.6, gd=far, gd_se=far_se),
        ]
    return pd.DataFrame(rows)


def test_gd_claim_by_hand_reproduced_not_reproduced_and_undecided_by_the_monte_carlo_error(tmp_path):
    """Each of the 8 parts tests 1 row, so z is Φ⁻¹(1 − 0.05/16) = 2.734 (Bonferroni over the 8 parts):
    0.99 ± 0.001 is 0.04 above 0.95, far beyond 2.734 × 0.001; 0.96 ± 0.01 is 0.01 above it, within
    0.0273: undecided; 0.90 ± 0.001 is below it by 0.05: not reproduced whatever the other rows say."""
    c = claim("li-sim-gd-one-close-zero-far")
    g = grid(tmp_path)
    assert evaluate_claim(c, pd.DataFrame(), g).verdict == NOT_RUN  # no figure drawn yet
    assert mc_z(1) == pytest.approx(1.959964, abs=1e-6)

    def verdict(close, close_se, far=0.0, far_se=0.0):
        write(tmp_path, "li2024/li2024_fig2", gd_rows(["arccon", "met"], close, close_se, far, far_se))
        write(tmp_path, "li2024/li2024_fig10", gd_rows(["infonce", "mpt"], 0.99, 0.001, 0.0, 0.0))
        return evaluate_claim(c, pd.DataFrame(), g)

    result = verdict(0.99, 0.001)
    assert result.verdict == REPRODUCED
    text = numbers_text(result)
    assert "simulated: each number a Monte-Carlo mean" in text and "1 of 1 rows ≥ 0.95" in text
    assert "Monte-Carlo ±0.0027: reproduced" in text  # 2.734 × 0.001, to two digits
    assert "(Bonferroni over its 8 parts and each part's rows)" in text
    assert verdict(0.9478, 0.001).verdict == UNDECIDED  # 2.2 se short: z 1.96 if each part were alone
    assert verdict(0.96, 0.01).verdict == UNDECIDED  # 0.01 above the bound, 0.0273 of noise
    assert verdict(0.96, 0.004).verdict == UNDECIDED  # 0.01 above, 0.0109 of noise
    assert verdict(0.96, 0.003).verdict == REPRODUCED  # 0.01 above, 0.0082 of noise
    assert verdict(0.90, 0.001).verdict == NOT_REPRODUCED
    # the far side: 0.04 ± 0.001 is below 0.05 by 0.01 > 0.0027; 0.06 ± 0.001 above it
    assert verdict(0.99, 0.001, far=0.04, far_se=0.001).verdict == REPRODUCED
    assert verdict(0.99, 0.001, far=0.06, far_se=0.001).verdict == NOT_REPRODUCED
    assert verdict(0.99, 0.001, far=0.045, far_se=0.01).verdict == UNDECIDED
    # an undecided part and a missed one: the miss decides
    assert verdict(0.96, 0.01, far=0.06, far_se=0.001).verdict == NOT_REPRODUCED


def test_bonferroni_widens_the_interval_with_the_rows_tested(tmp_path):
    """Two close rows per loss (of 8 parts): z = Φ⁻¹(1 − 0.05/32) = 2.9552, so 0.97 ± 0.007 (0.02 above
    0.95 against 0.0207) is undecided, where one row (z 2.7344: 0.0191) would be reproduced."""
    assert mc_z(2, 1 - 0.05 / 8) == pytest.approx(2.955167, abs=1e-6)
    c = claim("li-sim-gd-one-close-zero-far")
    g = grid(tmp_path)
    two = pd.concat([gd_rows(["arccon", "met"], 0.97, 0.007, 0.0, 0.0)] * 2, ignore_index=True)
    write(tmp_path, "li2024/li2024_fig2", two)
    write(tmp_path, "li2024/li2024_fig10", gd_rows(["infonce", "mpt"], 0.99, 0.001, 0.0, 0.0))
    assert evaluate_claim(c, pd.DataFrame(), g).verdict == UNDECIDED
    write(tmp_path, "li2024/li2024_fig2", gd_rows(["arccon", "met"], 0.97, 0.007, 0.0, 0.0))
    assert evaluate_claim(c, pd.DataFrame(), g).verdict == REPRODUCED


def share_rows(tau: float, shares: list[float], se: float) -> list[dict]:
    mu_neg = [0.3, 0.6, 0.9, 1.2]  # the first below mu_pos = pi/6 = 0.524: not read
    return [
        dict(tau=tau, mu_pos=math.pi / 6, mu_neg=m, share=s, share_se=se, share_all=s, kept=1.0)
        for m, s in zip(mu_neg, shares, strict=True)
    ]


def test_share_claims_by_hand(tmp_path):
    """τ 0.005: the rows at μ_neg ≥ π/6 (three; z = Φ⁻¹(1 − 0.05/6) = 2.394) above 0.5; a NaN row (no
    batch kept: the gradient dissipated) is no number and is skipped; τ 0.3: every such row below 0.5."""
    g = grid(tmp_path)
    small, large = claim("li-sim-small-tau-hardest-dominates"), claim("li-sim-tau-03-share-declines")
    rows = share_rows(0.005, [0.1, 0.7, 0.9, math.nan], 0.02) + share_rows(
        0.3, [0.01, 0.02, 0.02, 0.02], 0.001
    )
    write(tmp_path, "li2024/li2024_fig3", pd.DataFrame(rows))
    assert evaluate_claim(small, pd.DataFrame(), g).verdict == REPRODUCED  # 0.7 − 0.5 = 0.2 ≫ 2.24 × 0.02
    assert "2 of 2 rows > 0.5" in numbers_text(evaluate_claim(small, pd.DataFrame(), g))
    assert evaluate_claim(large, pd.DataFrame(), g).verdict == REPRODUCED
    rows = share_rows(0.005, [0.1, 0.55, 0.9, 0.95], 0.03) + share_rows(0.3, [0.01, 0.6, 0.02, 0.02], 0.001)
    write(tmp_path, "li2024/li2024_fig3", pd.DataFrame(rows))
    # 0.55 is 0.05 above 0.5, within 2.394 × 0.03 = 0.072: undecided; 0.6 at τ 0.3 is a clear miss
    assert evaluate_claim(small, pd.DataFrame(), g).verdict == UNDECIDED
    assert evaluate_claim(large, pd.DataFrame(), g).verdict == NOT_REPRODUCED
    # one batch kept: a share without its standard error is not an exact number, so it decides nothing
    rows = share_rows(0.005, [0.1, 0.7, 0.9, 0.95], 0.02) + share_rows(0.3, [0.01, 0.02, 0.6, 0.02], 0.001)
    rows[1]["share_se"] = rows[5]["share_se"] = math.nan
    write(tmp_path, "li2024/li2024_fig3", pd.DataFrame(rows))
    result = evaluate_claim(small, pd.DataFrame(), g)
    assert result.verdict == UNDECIDED
    assert "(worst 0.7, Monte-Carlo error unknown (one batch): undecided)" in numbers_text(result)
    assert evaluate_claim(large, pd.DataFrame(), g).verdict == NOT_REPRODUCED  # 0.6 misses: known se


def test_ratio_claim_by_hand(tmp_path):
    """Fig. 4: the share of occurring pairs with 1 ≤ R ≤ 2, per loss, above one half: 2 of 3 (0.667)
    reproduces; MAT's 1 of 3 does not. Pairs that do not occur are not counted."""
    c = claim("li-sim-ratios-between-1-and-2")
    g = grid(tmp_path)
    rows = []
    for loss, inside in {
        "arccon": [True, True, False],
        "met": [True, False, True],
        "mat": [True, False, False],
    }.items():
        rows += [dict(loss=loss, ratio=1.5, occurs=True, in_1_2=v) for v in inside]
        rows += [dict(loss=loss, ratio=4.0, occurs=False, in_1_2=False)] * 5
    write(tmp_path, "li2024/li2024_fig4", pd.DataFrame(rows))
    result = evaluate_claim(c, pd.DataFrame(), g)
    assert result.verdict == NOT_REPRODUCED
    assert "mean in_1_2 of {loss: mat, occurs: True} = 0.3333 (claimed > 0.5)" in numbers_text(result)
    frame = pd.DataFrame(rows)
    frame.loc[frame["loss"] == "mat", "in_1_2"] = frame.loc[frame["loss"] == "mat", "occurs"]
    write(tmp_path, "li2024/li2024_fig4", frame)
    assert evaluate_claim(c, pd.DataFrame(), g).verdict == REPRODUCED


def test_a_coarser_simulation_says_so_once(tmp_path):
    c = claim("li-sim-gd-one-close-zero-far")
    write(tmp_path, "li2024/li2024_fig2", gd_rows(["arccon", "met"], 0.99, 0.001, 0.0, 0.0))
    write(tmp_path, "li2024/li2024_fig10", gd_rows(["infonce", "mpt"], 0.99, 0.001, 0.0, 0.0))
    demo = numbers_text(
        evaluate_claim(c, pd.DataFrame(), grid(tmp_path, analytic_figures={"points": 40, "batches": 200}))
    )
    assert demo.count("coarser than the paper: 40 x 40 pairs, 200 batches (paper 100 x 100, 1,000)") == 1
    full = numbers_text(
        evaluate_claim(c, pd.DataFrame(), grid(tmp_path, analytic_figures={"points": 100, "batches": 1000}))
    )
    assert "coarser" not in full


def test_the_simulations_standard_errors_are_the_batches_spread_over_root_batches():
    """gd_se is the sample standard deviation of the per-batch GD over √batches: recomputed here from the
    same draws (one μ_pos row, the generator spawned as gd_monte_carlo spawns it)."""
    frame = gd_monte_carlo(("infonce",), points=(1, 3), batches=50, negatives=7, seed=3)
    mu_pos, mu_neg = 0.5 * (math.pi / 20 + math.pi / 20), np.linspace(math.pi / 20, math.pi, 3)
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(1)[0])
    cos_pos = np.cos(math.pi / 20 + 0.05 * rng.standard_normal((3, 50)))
    cos_neg = np.cos(mu_neg[:, None, None] + 0.10 * rng.standard_normal((3, 50, 7)))
    per_batch = gradient_dissipation("infonce", cos_pos, cos_neg)
    assert mu_pos == pytest.approx(math.pi / 20)
    np.testing.assert_allclose(frame["gd"], per_batch.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(frame["gd_se"], per_batch.std(-1, ddof=1) / math.sqrt(50), rtol=1e-12)
    np.testing.assert_allclose(frame["gap"], mu_neg - math.pi / 20)
    share = hardest_negative_share([0.05], points=3, batches=40, negatives=7, gd_threshold=None)
    assert (share["share_se"] > 0).all() and (share["share_se"] < share["share"]).all()
