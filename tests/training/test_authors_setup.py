"""The trainer settings that make a cell match its authors' run: head inits, dev pooling, precision."""

from __future__ import annotations

import json

import pytest
import torch

from contrastlab.precision import CHOICES
from contrastlab.training.dev import DevEvaluator
from contrastlab.training.runtime import resolve_precision
from contrastlab.training.sentence import TrainSettings, build_head


def _linears(head):
    return [m for m in head.modules() if isinstance(m, torch.nn.Linear)]


def test_simcse_head_is_initialised_like_berts_init_weights():
    """SimCSE's cl_init calls init_weights: Linear weight ~ N(0, initializer_range), bias 0."""
    torch.manual_seed(0)
    head, name = build_head("simcse", "bert", 768, initializer_range=0.02)
    (linear,) = _linears(head)
    assert isinstance(head[1], torch.nn.Tanh) and name == "linear+tanh(std 0.02)"
    assert torch.count_nonzero(linear.bias) == 0
    assert linear.weight.std().item() == pytest.approx(0.02, rel=0.01)  # 590k draws
    assert linear.weight.mean().abs().item() < 1e-3
    # PyTorch's default (kaiming uniform) would have std 1/sqrt(3 * 768) = 0.0208 and bounded values.
    assert linear.weight.abs().max().item() > 1 / 768**0.5


@pytest.mark.parametrize("model_type, first", [("bert", torch.nn.Linear), ("roberta", torch.nn.Tanh)])
def test_li2024_head_draws_weight_and_bias_from_normal_6e3(model_type, first):
    """Li et al.'s custom_param_init: nn.init.normal_ on the head's weight and bias, std 6e-3."""
    torch.manual_seed(0)
    head, _ = build_head("li2024", model_type, 768)
    (linear,) = _linears(head)
    assert isinstance(head[0], first)
    assert linear.weight.std().item() == pytest.approx(6e-3, rel=0.01)
    assert linear.bias.std().item() == pytest.approx(6e-3, rel=0.1)  # 768 draws
    assert torch.count_nonzero(linear.bias) == 768


def test_precision_resolution(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_precision("fp32", cuda) == "fp32" and resolve_precision("fp16", cuda) == "fp16"
    assert resolve_precision("tf32", cuda) == "tf32" and resolve_precision("tf32", cpu) == "fp32"
    assert resolve_precision("fp16", cpu) == "fp16"  # CPU autocast + GradScaler("cpu"): tested on CPU
    assert resolve_precision("auto", cpu) == "fp32" and resolve_precision("bf16", cpu) == "bf16"
    # auto never picks emulated bf16: it asks for native support only.
    asked = []
    monkeypatch.setattr(
        torch.cuda,
        "is_bf16_supported",
        lambda including_emulation=True: asked.append(including_emulation) or including_emulation,
    )
    assert resolve_precision("auto", cuda) == "fp32" and asked == [False]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert resolve_precision("auto", cuda) == "bf16"
    with pytest.raises(ValueError, match="precision must be one of auto, fp32, tf32, bf16, fp16"):
        TrainSettings(loss="infonce", precision="fp8")
    with pytest.raises(ValueError, match="dev_pooling must be one of cls, cls_mlp"):
        TrainSettings(loss="infonce", dev_pooling="avg")


def test_dev_evaluator_applies_the_head_only_for_cls_mlp(tiny_bert, senteval_dir):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert)
    evaluator = DevEvaluator(senteval_dir, "STSBenchmark", tokenizer, torch.device("cpu"))
    torch.manual_seed(1)
    head, _ = build_head("simcse", "bert", model.config.hidden_size, 0.5)
    head.train()
    raw = evaluator.embeddings(model)
    through = evaluator.embeddings(model, head)
    with torch.no_grad():
        expected = head.eval()(raw.clone())
    head.train()
    torch.testing.assert_close(through, expected, rtol=1e-5, atol=1e-6)
    assert head.training and not torch.allclose(raw, through)
    assert evaluator(model) != evaluator(model, head)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, train_tiny):
    """The same 8-step cell selected on the raw [CLS] and on [CLS] + MLP."""
    out = {}
    for pooling in ("cls", "cls_mlp"):
        tmp = tmp_path_factory.mktemp(pooling)
        # batches of 16, and no snapshot in the 8 steps (state_every at its default, 250)
        summary = train_tiny(tmp, batch_size=16, state_every=250, dev_pooling=pooling)
        out[pooling] = summary, [json.loads(x) for x in (tmp / "log.jsonl").read_text().splitlines()]
    return out


def test_dev_pooling_changes_model_selection_scores_only(runs):
    cls, mlp = runs["cls"], runs["cls_mlp"]
    assert cls[0]["dev_pooling"] == "cls" and mlp[0]["dev_pooling"] == "cls_mlp"
    train_losses = [[r["loss"] for r in log if r["event"] == "train"] for _, log in (cls, mlp)]
    assert train_losses[0] == train_losses[1]  # same training trajectory
    dev = [[r["dev_spearman"] for r in log if r["event"] == "eval"] for _, log in (cls, mlp)]
    assert len(dev[0]) == len(dev[1]) == 3 and dev[0] != dev[1]


def test_summary_records_requested_and_resolved_precision(runs):
    summary = runs["cls"][0]
    assert summary["requested_precision"] == "auto" and summary["precision"] == "fp32"
    assert summary["tf32_matmul"] is False and summary["tf32_conv"] is False
    assert summary["autocast_dtype"] is None and summary["loss_scaling"] is False
    assert CHOICES == ("auto", "fp32", "tf32", "bf16", "fp16")
