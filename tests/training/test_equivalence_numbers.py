"""The equivalence checks' numbers by hand (issue 63 item 8, review K4): the spread rule on stated runs
where the typical gaps (medians over pairs of runs) and the extreme ones (maxima) disagree, and the
padding-free row's ratio (best padding-free ms over best padded ms). The rule compares like with like:
the median graph-vs-eager gap against :data:`~contrastlab.training.equivalence.SPREAD_MARGIN` (2) times
the median eager-vs-eager gap."""

from __future__ import annotations

import pytest
import torch

from contrastlab.training import equivalence as eq

CPU = torch.device("cpu")


def _stated(monkeypatch, runs: dict) -> None:
    """run_steps stand-in: per kind (``graph``; ``padding_free`` for the padding-free runs), the stated
    (losses, steps/s) of each run in turn."""
    queue = {kind: list(stated) for kind, stated in runs.items()}

    def fake(make_model, batches, *, graph, padding_free=False, **_):
        losses, rate = queue["packed" if padding_free else ("graph" if graph else "eager")].pop(0)
        return {"losses": losses, "params": None, "steps_per_s": rate, "seconds": 1.0}

    monkeypatch.setattr(eq, "run_steps", fake)


#: One-step runs (the relative gap of a pair (a, b) is |a - b| / |a|, a the eager run). Eager runs
#: 1.0, 1.02, 1.1: the 3 eager pairs' gaps 0.02, 0.08/1.02 = 0.0784, 0.1 (median 0.0784, max 0.1), so
#: the rule's bound is 2 x 0.0784 = 0.1569.
EAGER = [([1.0], 1.0), ([1.02], 1.0), ([1.1], 1.0)]


def _runs(*losses: float) -> list:
    return [([loss], 1.0) for loss in losses]


def test_the_spread_rule_compares_the_median_gap_with_twice_the_median_eager_gap(monkeypatch):
    # Graph runs 1.13, 1.13, 1.2: the 9 gaps sorted 0.03/1.1 (x2), 0.1/1.1, 0.11/1.02 (x2), 0.13 (x2),
    # 0.18/1.02, 0.2. The median 0.11/1.02 = 0.1078 is above the eager max 0.1 (the rule before K4,
    # median gap <= max eager gap, said "not within") and below 0.1569: within.
    _stated(monkeypatch, {"eager": EAGER, "graph": _runs(1.13, 1.13, 1.2)})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=3)
    assert row["eager_vs_eager_median"] == pytest.approx(0.08 / 1.02, rel=1e-12)
    assert row["eager_vs_eager_max"] == pytest.approx(0.1, rel=1e-12)
    assert row["graph_vs_eager_median"] == pytest.approx(0.11 / 1.02, rel=1e-12)
    assert row["graph_vs_eager_max"] == pytest.approx(0.2, rel=1e-12)
    assert row["graph_vs_graph_max"] == pytest.approx(0.07 / 1.13, rel=1e-12)
    assert row["spread_margin"] == 2.0 and row["within"] is True
    # Graph runs 1.2, 1.2, 1.25: the 9 gaps sorted 0.1/1.1 (x2), 0.15/1.1, 0.18/1.02 (x2), 0.2 (x2),
    # 0.23/1.02, 0.25; the median 0.18/1.02 = 0.1765 > 0.1569: not within.
    _stated(monkeypatch, {"eager": EAGER, "graph": _runs(1.2, 1.2, 1.25)})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=3)
    assert row["graph_vs_eager_median"] == pytest.approx(0.18 / 1.02, rel=1e-12) and row["within"] is False


def test_one_far_eager_run_does_not_make_room_for_a_far_graph(monkeypatch):
    """repeat 5: eager 1.0, 1.0, 1.01, 1.01, 1.2; the 10 eager pairs sorted 0 (x2), 0.01 (x4), 0.19/1.01
    (x2), 0.2 (x2): median 0.01 (the 5th and 6th are both 0.01), max 0.2. Graph runs all 1.05: the 25
    gaps are 0.04/1.01 (x10), 0.05 (x10), 0.15/1.2 = 0.125 (x5), median (the 13th) 0.05 > 2 x 0.01: not
    within, though below the eager max 0.2 that one far eager run set (the rule before K4: within)."""
    _stated(monkeypatch, {"eager": _runs(1.0, 1.0, 1.01, 1.01, 1.2), "graph": _runs(*[1.05] * 5)})
    row = eq.spread_check(None, [], precision="fp16", device=CPU, repeat=5)
    assert row["eager_vs_eager_median"] == pytest.approx(0.01, rel=1e-12)
    assert row["eager_vs_eager_max"] == pytest.approx(0.2, rel=1e-12)
    assert row["graph_vs_eager_median"] == pytest.approx(0.05, rel=1e-12)
    assert row["graph_vs_eager_max"] == pytest.approx(0.125, rel=1e-12) and row["within"] is False


def test_the_median_of_an_even_number_of_gaps_is_the_mean_of_the_middle_two(monkeypatch):
    """repeat 2: eager 1.0 and 1.1 (one pair: median and max 0.1, bound 0.2); graph 1.15 and 1.5: gaps
    0.15, 0.5, 0.05/1.1, 0.4/1.1; sorted 0.0455, 0.15, 0.3636, 0.5: the median (0.15 + 0.3636) / 2 =
    0.2568 > 0.2: not within (the lower middle, 0.15, would have said within)."""
    _stated(monkeypatch, {"eager": _runs(1.0, 1.1), "graph": _runs(1.15, 1.5)})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=2)
    assert row["graph_vs_eager_median"] == pytest.approx((0.15 + 0.4 / 1.1) / 2, rel=1e-12)
    assert row["within"] is False


def test_the_padding_free_row_by_hand(monkeypatch):
    """Padded runs at 20 and 25 steps/s (best: 40 ms), padding-free at 30 and 32 (best: 31.25 ms):
    ratio 31.25 / 40 = 0.78125. Losses: padded 2.0 and 2.02 (spread 0.01: one pair, its median),
    padding-free 2.01 and 2.1: gaps sorted 0.01/2.02, 0.005, 0.08/2.02, 0.05; their median
    (0.005 + 0.08/2.02) / 2 = 0.0223 > 2 x 0.01: not within (the spread rule)."""
    padded = [([2.0], 20.0), ([2.02], 25.0)]
    packed = [([2.01], 30.0), ([2.1], 32.0)]
    _stated(monkeypatch, {"eager": padded, "packed": packed})
    row = eq.padding_free_check(None, [], precision="fp32", device=CPU, repeat=2, graph=False)
    assert row["padded_ms"] == 40.0 and row["packed_ms"] == 31.25 and row["ratio"] == 0.78125
    assert row["padded_vs_padded_max"] == row["padded_vs_padded_median"] == pytest.approx(0.01, rel=1e-12)
    assert row["packed_vs_padded_median"] == pytest.approx((0.005 + 0.08 / 2.02) / 2, rel=1e-12)
    assert row["packed_vs_padded_max"] == pytest.approx(0.05, rel=1e-12)
    assert row["within"] is False and "graph_ms" not in row
    # padding-free 2.005 and 2.022: gaps sorted 0.002/2.02, 0.0025, 0.015/2.02, 0.011; the median 0.005
    # is within 2 x the padded spread 0.01: within
    _stated(monkeypatch, {"eager": padded, "packed": [([2.005], 30.0), ([2.022], 32.0)]})
    row = eq.padding_free_check(None, [], precision="fp32", device=CPU, repeat=2, graph=False)
    assert row["packed_vs_padded_median"] == pytest.approx((0.0025 + 0.015 / 2.02) / 2, rel=1e-9)
    assert row["packed_vs_padded_max"] == pytest.approx(0.011, rel=1e-9) and row["within"] is True
