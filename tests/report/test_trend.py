"""Sweep claims as trends (contrastlab.report.trend): the slope over a sweep, its noise from the residuals,
checked on constructed sweeps against the least-squares formulas worked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.report.claims import (
    NOT_REPRODUCED,
    REPRODUCED,
    UNDECIDED,
    check_relation,
    evaluate_claim,
    numbers_text,
    seed_plan,
    verdict_text,
)
from contrastlab.tables.metrics import DEV_SPEARMAN
from tests.report.test_claims import FULL, T975, claim, swept
from tests.tables.tables_synthetic import scores_frame

R = [0.5, 1.0, 1.5, 2.0]


def sweep(scores: dict[float, list[float]], grid: Grid, experiment: str, method: str, task: str):
    """A metrics frame of ``method``'s sweep points (named as ``grid`` names them): value -> scores."""
    spec = grid.experiment(experiment).spec
    axis = next(iter(spec["sweep"]))
    names = {
        over[axis]: name for name, (base, over) in cl_config.expanded_methods(spec).items() if base == method
    }
    return scores_frame(
        (experiment, "bert-base", names[x], 42 + i, task, v)
        for x, values in scores.items()
        for i, v in enumerate(values)
    )


def li_r(values: list[float], seeds: int = 1) -> tuple[pd.DataFrame, Grid]:
    """Li Fig. 6 (right) on a four-point sweep r = 0.5 ... 2.0, one seed per point as configured."""
    grid = swept("li2024_fig6_r", list(range(42, 42 + seeds)), {"hp.r": R})
    scores = {r: [v] for r, v in zip(R, values, strict=True)}
    return sweep(scores, grid, "li2024_fig6_r", "baseline", DEV_SPEARMAN), grid


def test_an_increasing_one_seed_sweep_reproduces_a_rising_claim():
    frame, grid = li_r([1.0, 2.0, 4.0, 5.0])  # the by-hand sweep at r = 0.5 + 0.5·(0..3): 2.8 per unit r
    result = evaluate_claim(claim("li-fig6-r"), frame, grid)
    (part,) = result.parts
    assert part.diff == pytest.approx(2.8) and part.df == 2 and part.seeds == 1
    assert part.half_width == pytest.approx(T975[2] * math.sqrt(0.02) / 0.5, rel=1e-9)  # 1.217
    assert part.status == REPRODUCED and result.verdict == REPRODUCED
    # the slope is the contrast of the point means with coefficients (r − r̄) / S_xx,pts (S_xx,pts 1.25)
    assert list(part.terms.values()) == pytest.approx([-0.6, -0.2, 0.2, 0.6])
    assert "slope of baseline over r (claimed > 0) = +2.80 ± 1.22 (ν = 2, Spearman ρ +1.00)" in numbers_text(
        result
    )


def test_a_decreasing_sweep_contradicts_it_and_a_flat_noisy_one_is_undecided():
    falling = evaluate_claim(claim("li-fig6-r"), *li_r([5.0, 4.0, 2.0, 1.0]))
    assert falling.parts[0].diff == pytest.approx(-2.8) and falling.verdict == NOT_REPRODUCED
    # y 1 3 1 3: b 0.4 per index = 0.8 per unit r, residual SS 3.2, s² 1.6, se² = 1.6 / 5 / 0.25 = 1.28
    flat = evaluate_claim(claim("li-fig6-r"), *li_r([1.0, 3.0, 1.0, 3.0]))
    (part,) = flat.parts
    assert part.diff == pytest.approx(0.8)
    assert part.half_width == pytest.approx(T975[2] * math.sqrt(1.28), rel=1e-9)  # 4.87
    assert part.status == UNDECIDED and flat.verdict == UNDECIDED
    # n seeds per point at the same scatter: t_{4n−2} · sqrt(1.6 / (1.25 n)) < 0.8 first at n = 9
    assert part.seeds_needed == 9
    plan = seed_plan([flat], li_r([1.0] * 4)[1])
    assert plan[0]["methods"] == [f"baseline-r{r}" for r in R] and plan[0]["new"] == list(range(43, 51))


def test_the_configured_one_seed_sweeps_decide_the_figure_claims():
    """Audit B.3: with the config's own sweeps and one seed, a clear trend is decided either way."""
    fig3 = FULL["experiments"]["nie2023_fig3"]
    grid = Grid({"seeds": [42], "experiments": {"nie2023_fig3": fig3}})
    ms = fig3["sweep"]["hp.m"]
    peak = {m: [80.0 - 40.0 * abs(m - 0.23) + (0.05 if i % 2 else -0.05)] for i, m in enumerate(ms)}
    frame = sweep(peak, grid, "nie2023_fig3", "mpt", "sts_avg")
    result = evaluate_claim(claim("nie-mpt-best-margin"), frame, grid)
    rise, fall = result.parts
    assert rise.df == 2 and fall.df == 3  # 4 points in [0.10, 0.23], 5 in [0.23, 0.80] (0.23 in both)
    assert rise.diff == pytest.approx(40.0, abs=3) and fall.diff == pytest.approx(-40.0, abs=1)
    assert result.verdict == REPRODUCED
    rising = {m: [60.0 + 10.0 * m] for m in ms}  # no peak: the fall after 0.23 is contradicted
    frame = sweep(rising, grid, "nie2023_fig3", "mpt", "sts_avg")
    monotone = evaluate_claim(claim("nie-mpt-best-margin"), frame, grid)
    assert [p.status for p in monotone.parts] == [REPRODUCED, NOT_REPRODUCED]
    assert monotone.verdict == NOT_REPRODUCED
    # OAR's collapse on a log scale over 1e-3 ... 1: −10 points per decade
    lrs = FULL["experiments"]["oar_cifar10"]["sweep"]["lr"]
    curve = [40 - 10 * max(0.0, math.log10(lr) + 3) + 0.1 * (i % 2) for i, lr in enumerate(lrs)]
    losses = dict.fromkeys(("infonce", "dcl", "bt", "vicreg"), curve)
    collapse = evaluate_claim(claim("oar-original-collapses"), *oar_sweeps(losses))
    assert [len(p.terms) for p in collapse.parts] == [4] * 4 and collapse.verdict == REPRODUCED
    assert all(p.diff == pytest.approx(-10.0, abs=0.2) for p in collapse.parts)


def test_a_malformed_trend_claim_is_one_line_naming_the_fix():
    bad = {**claim("li-fig6-r"), "parts": [{"sweep": "baseline", "direction": "upwards"}]}
    with pytest.raises(ValueError, match="direction must be one of \\('increasing', 'decreasing'\\)"):
        check_relation(bad, "li2024.yaml")
    with pytest.raises(ValueError, match="margin is not for relation 'trend'"):
        check_relation({**claim("li-fig6-r"), "margin": 1.0}, "li2024.yaml")
    bad = claim("oar-keeps-accuracy-at-high-lr")
    with pytest.raises(ValueError, match="names one \\(phase: one of"):
        check_relation({**bad, "parts": [{"sweep": "oar_dcl", "direction": "increasing"}]}, "oar.yaml")
    with pytest.raises(ValueError, match="phases must be disjoint"):
        check_relation({**bad, "phases": {"a": [1e-3, 1e-1], "b": [1e-2, 1.0]}}, "oar.yaml")


def test_two_points_need_two_seeds_for_a_residual():
    """The demo's two-point sweeps: with one seed the line passes through both points (no residual, ν 0:
    undecided, more seeds named); with two seeds per point the scatter within each point is the noise."""
    one = swept("li2024_fig6_r", [42], {"hp.r": [0.5, 2.0]})
    frame = sweep({0.5: [1.0], 2.0: [5.0]}, one, "li2024_fig6_r", "baseline", DEV_SPEARMAN)
    result = evaluate_claim(claim("li-fig6-r"), frame, one)
    assert result.verdict == UNDECIDED and result.parts[0].df == 0 and result.parts[0].diff == 4 / 1.5
    assert verdict_text(result) == "undecided: needs ≥ 2 seeds per cell to measure the noise"
    two = swept("li2024_fig6_r", [42, 43], {"hp.r": [0.5, 2.0]})
    frame = sweep({0.5: [1.0, 2.0], 2.0: [5.0, 6.0]}, two, "li2024_fig6_r", "baseline", DEV_SPEARMAN)
    (part,) = evaluate_claim(claim("li-fig6-r"), frame, two).parts
    # x̄ 1.25, S_xx 2.25, S_xy 6: b 8/3; residuals ±0.5 (SS 1, ν 2): se² = 0.5 / 2.25
    assert part.diff == pytest.approx(8 / 3) and part.df == 2 and part.seeds == 2
    assert part.half_width == pytest.approx(T975[2] * math.sqrt(0.5 / 2.25), rel=1e-9)
    assert part.status == REPRODUCED


def oar_sweeps(curves: dict[str, list[float]]) -> tuple[pd.DataFrame, Grid]:
    """OAR Fig. 2 (10 % labels) on config.yaml's eight rates 1e-7 ... 1, one seed: method -> accuracies."""
    oar = FULL["experiments"]["oar_cifar10"]
    lrs, grid = oar["sweep"]["lr"], Grid({"seeds": [42], "experiments": {"oar_cifar10": oar}})
    frame = pd.concat(
        [
            sweep(dict(zip(lrs, ([v] for v in ys), strict=True)), grid, "oar_cifar10", m, "ffn10_top1")
            for m, ys in curves.items()
        ],
        ignore_index=True,
    ).assign(backbone="resnet18-oar")
    return frame, grid


#: Claims audit C-1's constructed curve: it rises to 69 at 1e-2 and falls 29 points across the "Strong
#: Learning" phase [1e-2, 1]; the other three OAR losses rise across it, +10.25 per decade.
FALLING = [10, 10, 12, 30, 50, 69, 60, 40]
RISING = [10, 10, 11, 20, 35, 50, 60, 70.5]


def test_a_curve_that_falls_across_the_strong_phase_does_not_keep_accuracy_there():
    """OAR's "accuracy continually increases even in the 'Strong Learning' phase", on that phase: slope
    −14.5, not reproduced. By hand: residual SS 0.667 + 20.167 for the falling curve and 0.1667 + 0.0417
    for each rising one, pooled over the four losses: s² = 21.458 / 8, se = s / sqrt(2)."""
    frame, grid = oar_sweeps(
        {"oar_infonce": FALLING, "oar_dcl": RISING, "oar_bt": RISING, "oar_vicreg": RISING}
    )
    whole = {**claim("oar-keeps-accuracy-at-high-lr"), "phases": None}
    whole["parts"] = [{k: v for k, v in p.items() if k != "phase"} for p in whole["parts"]]
    before = evaluate_claim(whole, frame, grid)
    assert before.verdict == REPRODUCED  # the old whole-sweep reading
    assert before.parts[0].diff == pytest.approx(7.75, abs=0.01)
    assert before.parts[0].half_width == pytest.approx(5.58, abs=0.01)
    after = evaluate_claim(claim("oar-keeps-accuracy-at-high-lr"), frame, grid)
    falling, *rising = after.parts
    assert falling.diff == pytest.approx(-14.5) and falling.df == 8 and falling.status == NOT_REPRODUCED
    se = math.sqrt((0.6667 + 20.1667 + 3 * (0.1667 + 0.0417)) / 8 / 2)
    assert falling.half_width == pytest.approx(2.306004 * se, rel=1e-3)  # t_{0.975, 8}
    assert all(p.diff == pytest.approx(10.25) and p.status == REPRODUCED for p in rising)
    assert after.verdict == NOT_REPRODUCED
    # a diverged run outside the phase (NaN at 1e-6) leaves that point's residual out, not the part
    diverged = frame.assign(score=frame["score"].where(~frame["method"].str.fullmatch("oar_dcl-lr1e-06")))
    assert diverged["score"].isna().sum() == 1
    kept = evaluate_claim(claim("oar-keeps-accuracy-at-high-lr"), diverged, grid)
    assert kept.parts[1].status == REPRODUCED and kept.parts[1].df == 7
    assert "oar_infonce over log10 lr in the 'Strong Learning' phase [0.01, 1] (claimed > 0) = -14.50" in (
        numbers_text(after)
    )
    # a perfect rise through the Strong phase everywhere is reproduced at one seed
    ok = evaluate_claim(
        claim("oar-keeps-accuracy-at-high-lr"),
        *oar_sweeps(dict.fromkeys(("oar_infonce", "oar_dcl", "oar_bt", "oar_vicreg"), RISING)),
    )
    assert ok.verdict == REPRODUCED


def test_the_variance_drops_in_the_mild_phase_and_recovers_in_the_strong_one():
    """OAR §5.1 (claims audit §3 O2): both phases the sentence names are tested, per loss, with the
    residuals of each loss's own per-phase lines (pool: method): one seed, ν = 8 − 6 = 2 per loss."""
    recovers = [5.0, 5.1, 4.9, 4.0, 2.0, 3.0, 6.0, 9.1]
    flat_after = [5.0, 5.1, 4.9, 4.0, 2.0, 3.0, 1.5, 0.0]  # no recovery: it falls on in the Strong phase
    frame, grid = oar_sweeps(
        {"oar_infonce": recovers, "oar_dcl": recovers, "oar_bt": recovers, "oar_vicreg": flat_after}
    )
    frame = frame.assign(task="embedding_variance")
    result = evaluate_claim(claim("oar-variance-recovers-at-high-lr"), frame, grid)
    assert [round(p.diff, 2) for p in result.parts] == [-2.0, 3.05] * 3 + [-2.0, -1.5]
    assert all(p.df == 2 for p in result.parts)  # each loss's own residuals: SS 0.015 + 0.0017 for "recovers"
    assert [p.status for p in result.parts[:6]] == [REPRODUCED] * 6
    assert result.parts[-1].status == NOT_REPRODUCED and result.verdict == NOT_REPRODUCED
