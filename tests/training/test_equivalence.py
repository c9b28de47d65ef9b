"""training.equivalence on a CPU: the eager half runs for real (bit-reproducible there); the graph half
needs CUDA, so the verdicts are tested on stated loss sequences worked by hand."""

from __future__ import annotations

import pytest
import torch

from contrastlab.training import equivalence as eq
from contrastlab.training.sentence import build_head

CPU = torch.device("cpu")


def _tiny():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    head, _ = build_head("simcse", "bert", 32, 0.2)
    return BertModel(config).train(), head.train()


def test_two_eager_runs_on_a_cpu_are_bit_equal_and_a_seed_changes_them():
    g = torch.Generator().manual_seed(1)
    batches = [
        (torch.randint(5, 200, (8, 16), generator=g), torch.ones(8, 16, dtype=torch.long)) for _ in range(3)
    ]
    runs = [eq.run_steps(_tiny, batches, precision="fp32", device=CPU, graph=False, steps=12, seed=s,
                         keep_params=True) for s in (0, 0, 1)]  # fmt: skip
    assert runs[0]["losses"] == runs[1]["losses"] and torch.equal(runs[0]["params"], runs[1]["params"])
    assert not torch.equal(runs[0]["params"], runs[2]["params"])
    assert runs[0]["losses"] != runs[2]["losses"]  # other dropout masks: the comparison can fail
    assert len(runs[0]["losses"]) == 12 and runs[0]["losses"][-1] < runs[0]["losses"][0]


def test_max_rel_diff():
    assert eq.max_rel_diff([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert eq.max_rel_diff([1.0, 2.0], [1.1, 2.0]) == pytest.approx(0.1)


def _stated(monkeypatch, runs: dict) -> None:
    """run_steps stand-in: per kind (``graph``; ``padding_free`` for the padding-free runs), the stated
    (losses, steps/s) of each run in turn."""
    queue = {kind: list(stated) for kind, stated in runs.items()}

    def fake(make_model, batches, *, graph, padding_free=False, **_):
        losses, rate = queue["packed" if padding_free else ("graph" if graph else "eager")].pop(0)
        return {"losses": losses, "params": torch.tensor(losses), "steps_per_s": rate, "seconds": 1.0}

    monkeypatch.setattr(eq, "run_steps", fake)


#: One-step runs (the relative gap of a pair (a, b) is |a - b| / |a|, a the eager run). Eager runs
#: 1.0, 1.02, 1.1: the 3 eager pairs' gaps 0.02, 0.08/1.02 = 0.0784, 0.1 (median 0.0784, max 0.1), so
#: the rule's bound is 2 x 0.0784 = 0.1569.
EAGER = [([1.0], 1.0), ([1.02], 1.0), ([1.1], 1.0)]


def _runs(*losses) -> list:
    """Runs at 1 step/s of the stated losses (a number: a one-step run)."""
    return [(loss if isinstance(loss, list) else [loss], 1.0) for loss in losses]


def test_the_spread_rule_compares_the_median_gap_with_twice_the_median_eager_gap(monkeypatch):
    # Graph runs 1.13, 1.13, 1.2: the 9 gaps sorted 0.03/1.1 (x2), 0.1/1.1, 0.11/1.02 (x2), 0.13 (x2),
    # 0.18/1.02, 0.2. The median 0.11/1.02 = 0.1078 is above the eager max 0.1 and below 0.1569: within.
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
    within, though below the eager max 0.2 that one far eager run set."""
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


def test_the_spread_check_passes_a_graph_inside_eagers_spread_and_fails_one_outside_it(monkeypatch):
    eager = _runs([1.0, 0.5], [1.0, 0.51], [1.0, 0.49])  # eager vs eager: up to 0.04 relative
    _stated(monkeypatch, {"eager": eager, "graph": _runs([1.0, 0.5], [1.0, 0.505], [1.0, 0.5])})
    row = eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=3)
    assert row["within"] and row["eager_vs_eager_max"] == pytest.approx(0.02 / 0.51)
    eager = _runs([1.0, 0.5], [1.0, 0.5001], [1.0, 0.5])
    _stated(monkeypatch, {"eager": eager, "graph": _runs([1.0, 0.52], [1.0, 0.52], [1.0, 0.52])})
    assert not eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=3)["within"]
    with pytest.raises(ValueError, match="at least 2 runs"):
        eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=1)


def test_the_deterministic_check_asks_bit_equality_and_diagnoses_a_difference(monkeypatch):
    _stated(monkeypatch, {"eager": _runs([1.0, 0.5]), "graph": _runs([1.0, 0.5])})
    assert eq.deterministic_check(_tiny, [], precision="fp32", device=CPU, steps=2)["bit_equal"]
    _stated(monkeypatch, {"eager": _runs([1.0, 0.5], [1.0, 0.5]), "graph": _runs([1.0, 0.5000001])})
    row = eq.deterministic_check(_tiny, [], precision="fp32", device=CPU, steps=2)
    assert not row["bit_equal"] and row["eager_repeat_bit_equal"] is True
    assert row["max_rel_diff"] == pytest.approx(2e-7)


def test_the_padding_free_check_on_a_cpu_finds_the_padded_numbers_within_fp32_rounding():
    """Real runs (tiny BERT, dropout on, right-padded rows of lengths 3..16): padding-free eager against
    padded eager, the same seed. On a CPU the padded runs agree bit for bit (spread 0, so ``within``
    cannot hold), and the padding-free run sits within fp32 rounding of them."""
    g = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(3):
        lengths = torch.randint(3, 17, (8,), generator=g)
        lengths[0] = 16
        mask = (torch.arange(16)[None, :] < lengths[:, None]).long()
        batches.append((torch.randint(5, 200, (8, 16), generator=g) * mask, mask))
    row = eq.padding_free_check(_tiny, batches, precision="fp32", device=CPU, steps=20, repeat=2)
    assert row["padded_vs_padded_max"] == 0.0 and row["within"] is False
    assert 0 < row["packed_vs_padded_max"] < 1e-5, row
    assert row["ratio"] > 0 and "graph_ms" not in row
    with pytest.raises(ValueError, match="padding_free runs the eager step"):
        eq.run_steps(_tiny, batches, precision="fp32", device=CPU, graph=True, steps=1, padding_free=True)
