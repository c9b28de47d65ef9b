"""contrastlab.training.equivalence on a CPU: the eager half runs for real (a CPU's eager step is
bit-reproducible, so two runs agree bit for bit and a changed seed does not); the graph half needs CUDA
(tests/training/test_cuda.py), so the checks' verdicts are tested on stated loss sequences."""

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


@pytest.fixture(scope="module")
def batches():
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randint(5, 200, (8, 16), generator=g), torch.ones(8, 16, dtype=torch.long)) for _ in range(3)
    ]


def test_two_eager_runs_on_a_cpu_are_bit_equal_and_a_seed_changes_them(batches):
    runs = [eq.run_steps(_tiny, batches, precision="fp32", device=CPU, graph=False, steps=12, seed=s,
                         keep_params=True) for s in (0, 0, 1)]  # fmt: skip
    assert runs[0]["losses"] == runs[1]["losses"] and torch.equal(runs[0]["params"], runs[1]["params"])
    assert not torch.equal(runs[0]["params"], runs[2]["params"])
    assert runs[0]["losses"] != runs[2]["losses"]  # other dropout masks: the comparison can fail
    assert len(runs[0]["losses"]) == 12 and runs[0]["losses"][-1] < runs[0]["losses"][0]


def test_max_rel_diff():
    assert eq.max_rel_diff([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert eq.max_rel_diff([1.0, 2.0], [1.1, 2.0]) == pytest.approx(0.1)


def _fake_runs(monkeypatch, eager, graph):
    """run_steps stand-in: the stated loss sequences, eager runs first, then graph runs."""
    queue = {False: list(eager), True: list(graph)}

    def fake(make_model, batches, *, graph, **_):
        losses = queue[graph].pop(0)
        return {"losses": losses, "params": torch.tensor(losses), "steps_per_s": 1.0, "seconds": 1.0}

    monkeypatch.setattr(eq, "run_steps", fake)


def test_the_spread_check_passes_a_graph_inside_eagers_spread(monkeypatch):
    eager = [[1.0, 0.5], [1.0, 0.51], [1.0, 0.49]]  # eager vs eager: up to 0.04 relative
    _fake_runs(monkeypatch, eager, [[1.0, 0.5], [1.0, 0.505], [1.0, 0.5]])
    row = eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=3)
    assert row["within"] and row["eager_vs_eager_max"] == pytest.approx(0.02 / 0.51)


def test_the_spread_check_fails_a_graph_outside_it(monkeypatch):
    eager = [[1.0, 0.5], [1.0, 0.5001], [1.0, 0.5]]
    _fake_runs(monkeypatch, eager, [[1.0, 0.52], [1.0, 0.52], [1.0, 0.52]])
    assert not eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=3)["within"]
    with pytest.raises(ValueError, match="at least 2 runs"):
        eq.spread_check(_tiny, [], precision="bf16", device=CPU, repeat=1)


def test_the_deterministic_check_asks_bit_equality_and_diagnoses_a_difference(monkeypatch):
    _fake_runs(monkeypatch, [[1.0, 0.5]], [[1.0, 0.5]])
    assert eq.deterministic_check(_tiny, [], precision="fp32", device=CPU, steps=2)["bit_equal"]
    _fake_runs(monkeypatch, [[1.0, 0.5], [1.0, 0.5]], [[1.0, 0.5000001]])
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
