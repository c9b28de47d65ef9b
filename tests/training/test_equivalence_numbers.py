"""The equivalence checks' numbers by hand (issue 63 item 8): the spread rule's statistic on stated runs
where the typical gap (the median over the graph x eager pairs) and the worst gap (the max) disagree,
and the padding-free row's ratio (best padding-free ms over best padded ms)."""

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
#: 1.0, 1.02, 1.1: spread pairs 0.02, 0.1, 0.08/1.02 = 0.0784 (max 0.1, median 0.0784). Graph runs 1.09,
#: 1.09, 1.2 against each eager run, the 9 gaps sorted: 0.01/1.1 (x2), 0.07/1.02 (x2), 0.09 (x2),
#: 0.1/1.1, 0.18/1.02, 0.2: the median 0.09 is within the eager max 0.1, the worst gap 0.2 is not, and
#: the median is above the eager pairs' median 0.0784: only "median gap <= max spread" says within.
EAGER = [([1.0], 1.0), ([1.02], 1.0), ([1.1], 1.0)]
GRAPH = [([1.09], 1.0), ([1.09], 1.0), ([1.2], 1.0)]


def test_the_spread_rule_compares_the_median_gap_with_the_largest_eager_gap(monkeypatch):
    _stated(monkeypatch, {"eager": EAGER, "graph": GRAPH})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=3)
    assert row["eager_vs_eager_max"] == pytest.approx(0.1, rel=1e-12)
    assert row["graph_vs_eager_median"] == pytest.approx(0.09, rel=1e-12)
    assert row["graph_vs_eager_max"] == pytest.approx(0.2, rel=1e-12)
    assert row["graph_vs_graph_max"] == pytest.approx(0.11 / 1.09, rel=1e-12)
    assert row["within"] is True
    # the same runs with the worst graph run a little worse: the median gap 0.09 still within
    _stated(monkeypatch, {"eager": EAGER, "graph": GRAPH[:2] + [([1.5], 1.0)]})
    assert eq.spread_check(None, [], precision="bf16", device=CPU, repeat=3)["within"] is True
    # the typical gap above the eager spread: graph runs 1.13, 1.13, 1.2; the 9 gaps sorted 0.03/1.1
    # (x2), 0.1/1.1, 0.11/1.02 (x2), 0.13 (x2), 0.18/1.02, 0.2: the median 0.1078 > 0.1
    _stated(monkeypatch, {"eager": EAGER, "graph": [([1.13], 1.0)] * 2 + [([1.2], 1.0)]})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=3)
    assert row["graph_vs_eager_median"] == pytest.approx(0.11 / 1.02, rel=1e-12) and row["within"] is False


def test_the_median_of_an_even_number_of_gaps_is_the_mean_of_the_middle_two(monkeypatch):
    """repeat 2: eager 1.0 and 1.1 (spread 0.1); graph 1.05 and 1.3: gaps 0.05, 0.05/1.1, 0.3, 0.2/1.1;
    sorted 0.0455, 0.05, 0.1818, 0.3: the median (0.05 + 0.1818) / 2 = 0.1159 > 0.1: not within (the
    lower middle, 0.05, would have said within)."""
    _stated(monkeypatch, {"eager": [([1.0], 1.0), ([1.1], 1.0)], "graph": [([1.05], 1.0), ([1.3], 1.0)]})
    row = eq.spread_check(None, [], precision="bf16", device=CPU, repeat=2)
    assert row["graph_vs_eager_median"] == pytest.approx((0.05 + 0.2 / 1.1) / 2, rel=1e-12)
    assert row["within"] is False


def test_the_padding_free_row_by_hand(monkeypatch):
    """Padded runs at 20 and 25 steps/s (best: 40 ms), padding-free at 30 and 32 (best: 31.25 ms):
    ratio 31.25 / 40 = 0.78125. Losses: padded 2.0 and 2.02 (spread 0.01), padding-free 2.01 and 2.1:
    gaps sorted 0.01/2.02, 0.005, 0.08/2.02, 0.05; their median (0.005 + 0.08/2.02) / 2 = 0.0223 > 0.01:
    not within."""
    padded = [([2.0], 20.0), ([2.02], 25.0)]
    packed = [([2.01], 30.0), ([2.1], 32.0)]
    _stated(monkeypatch, {"eager": padded, "packed": packed})
    row = eq.padding_free_check(None, [], precision="fp32", device=CPU, repeat=2, graph=False)
    assert row["padded_ms"] == 40.0 and row["packed_ms"] == 31.25 and row["ratio"] == 0.78125
    assert row["padded_vs_padded_max"] == pytest.approx(0.01, rel=1e-12)
    assert row["packed_vs_padded_median"] == pytest.approx((0.005 + 0.08 / 2.02) / 2, rel=1e-12)
    assert row["packed_vs_padded_max"] == pytest.approx(0.05, rel=1e-12)
    assert row["within"] is False and "graph_ms" not in row
    # padding-free 2.005 and 2.022: gaps sorted 0.002/2.02, 0.0025, 0.015/2.02, 0.011; the median 0.005
    # is within the padded spread 0.01, the worst gap 0.011 is not: within (the spread rule's median)
    _stated(monkeypatch, {"eager": padded, "packed": [([2.005], 30.0), ([2.022], 32.0)]})
    row = eq.padding_free_check(None, [], precision="fp32", device=CPU, repeat=2, graph=False)
    assert row["packed_vs_padded_median"] == pytest.approx((0.0025 + 0.015 / 2.02) / 2, rel=1e-9)
    assert row["packed_vs_padded_max"] == pytest.approx(0.011, rel=1e-9) and row["within"] is True
