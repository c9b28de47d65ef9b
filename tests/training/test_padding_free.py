"""The sentence trainer's ``padding_free`` switch: when it turns on, what it changes (the
numbers only at rounding level, dropout on), and the one-line errors where it cannot run."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from contrastlab.models.packed import PaddingFree
from contrastlab.training import sentence
from contrastlab.training.dev import DevEvaluator
from contrastlab.training.sentence import LATER_DEFAULTS, TrainSettings
from contrastlab.training.settings import fingerprint_settings

#: train_tiny's cell for 12 steps, logged every 2.
SMALL = dict(max_steps=12, log_every=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, train_tiny):
    """The same tiny-BERT cell (dropout 0.1) trained padded and padding-free on the CPU, and a
    padding-free one with two encoder micro-batches (gradient caching replays the masks)."""

    def run(name: str, **overrides) -> tuple[dict, list[dict], Path]:
        folder = tmp_path_factory.mktemp(name)
        summary = train_tiny(folder, **SMALL, **overrides)
        log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
        return summary, log, folder / "model"

    return {
        "padded": run("padded"),
        "packed": run("packed", padding_free=True),
        "packed_accum": run("packed-accum", padding_free=True, grad_accum=2),
        "padded_accum": run("padded-accum", grad_accum=2),
    }


def _curves(log: list[dict]) -> tuple[list[float], list[float]]:
    return (
        [r["loss"] for r in log if r["event"] == "train"],
        [r["dev_spearman"] for r in log if r["event"] == "eval"],
    )


@pytest.mark.parametrize("pair", [("padded", "packed"), ("padded_accum", "packed_accum")])
def test_padding_free_training_gives_the_padded_numbers_within_rounding(trained, pair):
    """Same seed, dropout on: curve, dev scores, selected step and weights agree within fp32 rounding."""
    (ref_summary, ref_log, ref_model), (summary, log, model) = trained[pair[0]], trained[pair[1]]
    ref_losses, ref_dev = _curves(ref_log)
    losses, dev = _curves(log)
    assert len(losses) == len(ref_losses) == 6 and len(dev) == len(ref_dev) == 4
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(dev, ref_dev, rtol=0, atol=1e-3)
    assert summary["best_step"] == ref_summary["best_step"]
    a, b = load_file(ref_model / "model.safetensors"), load_file(model / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        if key.endswith("attention.self.key.bias"):
            # Softmax ignores a shift shared by all keys: this bias's gradient is zero up to rounding, and
            # Adam turns rounding noise into updates of up to ~lr a step on either side.
            steps, lr = summary["steps"], summary["settings"]["lr"]  # 12 steps of 1e-4
            assert (steps, lr) == (12, 1e-4) and (b[key] - a[key]).abs().max() <= 2 * steps * lr, key
            continue
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5, msg=key)


def test_the_summary_and_log_say_which_encoder_ran(trained):
    assert trained["packed"][0]["settings"]["padding_free"] is True
    assert trained["padded"][0]["settings"]["padding_free"] is False  # decided for the CPU: off
    timings = trained["packed"][0]["timings"]  # make gpu-check counts the FLOPs at the tokens that ran
    assert 0 < timings["real_tokens"] < timings["padded_tokens"] and timings["sentences"] == 12 * 32
    notes = [r["text"] for r in trained["padded"][1] if r["event"] == "note"]
    assert not any("padding_free" in n for n in notes)


def _decide(tmp_path: Path, device: str, precision: str, model_type: str = "bert", **settings):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    run = SimpleNamespace(device=torch.device(device), precision=SimpleNamespace(name=precision))
    return sentence._for_device(TrainSettings(loss="infonce", **settings), run, tmp_path)


@pytest.mark.parametrize(
    "device, precision, model_type, settings, packed, graph",
    [
        ("cuda", "fp32", "bert", {}, True, False),  # on for IEEE fp32 on CUDA, where it replaces the graph
        ("cuda", "bf16", "bert", {}, False, True),  # launch-bound: the graph
        ("cuda", "tf32", "roberta", {}, False, True),
        ("cpu", "fp32", "bert", {}, False, False),  # CPU runs keep their numbers
        ("cuda", "fp32", "distilbert", {}, False, True),  # not a packed architecture
        ("cuda", "fp32", "bert", {"cuda_graph": True}, False, True),  # the graph asked for by name
        ("cuda", "fp32", "bert", {"compile": True}, False, True),
        ("cuda", "fp32", "bert", {"padding_free": False}, False, True),
        ("cpu", "fp32", "bert", {"padding_free": True}, True, False),  # asked for by name: it runs anywhere
        ("cuda", "bf16", "bert", {"padding_free": True}, True, False),  # and the graph gives way
    ],
)
def test_when_it_is_on_and_the_graph_runs(tmp_path, device, precision, model_type, settings, packed, graph):
    s, _ = _decide(tmp_path, device, precision, model_type, **settings)
    assert s.padding_free is packed and s.cuda_graph is graph


def test_on_by_default_it_says_so_in_one_note(tmp_path):
    notes = _decide(tmp_path, "cuda", "fp32")[1]
    assert [n for n in notes if n.startswith("padding_free: on (fp32 on cuda")] == notes and len(notes) == 1


@pytest.mark.parametrize("switch", ["cuda_graph", "compile"])
def test_with_a_static_graph_it_is_a_one_line_error(switch):
    with pytest.raises(ValueError, match=f"set padding_free: false or {switch}: false"):
        TrainSettings(loss="infonce", padding_free=True, **{switch: True})


def test_an_unsupported_backbone_asked_for_by_name_is_a_one_line_error():
    with pytest.raises(TypeError, match=r"padding_free \(bert, roberta\), got Linear; set padding_free"):
        sentence._encoder(TrainSettings(loss="infonce", padding_free=True), torch.nn.Linear(2, 2))


def test_snapshots_written_before_the_switch_still_resume():
    """None and false (the old behaviour) are left out of the snapshot fingerprint; true changes it."""
    base = TrainSettings(loss="infonce").to_dict()
    old = fingerprint_settings({k: v for k, v in base.items() if k != "padding_free"}, LATER_DEFAULTS)
    for value in (None, False):
        assert fingerprint_settings({**base, "padding_free": value}, LATER_DEFAULTS) == old
    assert "padding_free" in fingerprint_settings({**base, "padding_free": True}, LATER_DEFAULTS)


def test_the_dev_evaluation_through_the_drop_in_encoder_gives_the_padded_scores(tiny_bert, senteval_dir):
    """The padding-free encoder gives the dev evaluation's embeddings within rounding and the same scores."""
    from transformers import AutoTokenizer

    model = sentence._load_model(tiny_bert, 0.1).eval()
    evaluator = DevEvaluator(
        senteval_dir, "STSBenchmark", AutoTokenizer.from_pretrained(tiny_bert), torch.device("cpu")
    )
    padded, packed = evaluator.embeddings(model), evaluator.embeddings(PaddingFree(model))
    torch.testing.assert_close(packed, padded, rtol=1e-5, atol=1e-6)
    a, b = evaluator(model), evaluator(PaddingFree(model))
    assert b["dev_spearman"] == pytest.approx(a["dev_spearman"], abs=1e-3)
    assert b["dev_uniformity"] == pytest.approx(a["dev_uniformity"], rel=1e-5)


def test_the_padding_free_step_gets_the_host_mask_and_reads_no_device_data(monkeypatch):
    """A padding-free step keeps its mask on the host and runs on the meta device; a padded one's moves."""
    from transformers import BertConfig, BertModel

    def loss_fn(h1, h2, with_stats):
        return SimpleNamespace(loss=(h1 * h2).sum())

    def to_meta(ids, mask, device, *, host_mask=False):  # to_device's CUDA branch, the meta device's way
        return ids.to("meta"), mask if host_mask else mask.to("meta")

    monkeypatch.setattr(sentence, "to_device", to_meta)
    mask = (torch.arange(8)[None, :] < torch.tensor([8, 3, 5, 1])[:, None]).long()
    batch = SimpleNamespace(batch=lambda rows, pad: (mask * 7, mask))
    corpus = SimpleNamespace(tokenizer=SimpleNamespace(pad_token_id=0), sentences=batch)
    meta = torch.device("meta")
    settings = SimpleNamespace(static_shapes=False, cuda_graph=False, padding_free=True)
    ids, host = sentence._batch(settings, corpus, [0, 1, 2, 3], meta)

    torch.manual_seed(0)
    config = BertConfig(vocab_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)  # fmt: skip
    model = BertModel(config).train().to(meta)
    head, _ = sentence.build_head("simcse", "bert", 16)
    out, h1, _ = sentence.train_step(
        PaddingFree(model), head.to(meta), loss_fn, [(ids, host)],
        autocast=contextlib.nullcontext, with_stats=False,
    )  # fmt: skip
    assert out.loss.device == meta and h1.shape == (4, 16)
    assert all(p.grad is not None for name, p in model.named_parameters() if not name.startswith("pooler"))
    assert ids.device == meta and host.device.type == "cpu" and torch.equal(host, mask)
    settings.padding_free = False
    assert sentence._batch(settings, corpus, [0, 1, 2, 3], meta)[1].device == meta  # padded: as before
