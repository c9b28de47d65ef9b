"""The GPU path on a CUDA device: each precision against fp32, fused AdamW, resume after a kill, GPU
against CPU evaluation, and the CUDA graph (bit-equal under deterministic algorithms, within eager's
spread otherwise, an uncapturable step run eagerly). Skipped without CUDA (``make gpu-check`` runs
them); tolerances are stated per test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from contrastlab.losses import build_loss
from contrastlab.precision import fp32_mode_now
from contrastlab.training import sentence
from contrastlab.training.runtime import Precision, TrainingRun, build_optimizer
from tests.training.test_runtime import fused_and_plain

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")

CUDA = torch.device("cuda")
#: |step loss - fp32 step loss| for the tiny BERT's InfoNCE (about 3.5): bf16 keeps 8 mantissa bits,
#: fp16 11; a few layers of rounding stay well inside these.
LOSS_TOLERANCE = {"tf32": 5e-3, "bf16": 5e-2, "fp16": 2e-2}
#: After 8 steps at lr 1e-4, a resumed cell's weights differ from an uninterrupted one's only by the GPU's
#: non-deterministic reductions: far below one step's update.
RESUME_WEIGHT_TOLERANCE = 1e-4


def _skip_without_bf16(precision: str) -> None:
    if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip("this GPU has no native bf16")


@pytest.fixture(scope="module")
def chunks(tokenized):
    tokenizer, cached = tokenized
    ids, mask = cached.batch(np.arange(32), tokenizer.pad_token_id)
    return [(ids.to(CUDA), mask.to(CUDA))]


def _step_loss(tiny_bert, chunks, precision: str) -> float:
    torch.manual_seed(0)
    model = sentence._load_model(tiny_bert, 0.0).to(CUDA).train()
    head, _ = sentence.build_head("simcse", "bert", model.config.hidden_size, 0.2)
    head.to(CUDA).train()
    p = Precision.resolve(precision, CUDA)
    assert p.name == precision
    with p.step():
        if precision == "tf32":
            assert fp32_mode_now() == {"matmul": "tf32", "conv": "tf32"}
        out, _, _ = sentence.train_step(
            model, head, build_loss("infonce"), chunks, autocast=p.autocast, with_stats=False
        )
    return out.loss.item()


@pytest.mark.parametrize("precision", ["tf32", "bf16", "fp16"])
def test_each_precision_step_is_within_tolerance_of_fp32(tiny_bert, chunks, precision):
    _skip_without_bf16(precision)
    reference = _step_loss(tiny_bert, chunks, "fp32")
    assert abs(_step_loss(tiny_bert, chunks, precision) - reference) < LOSS_TOLERANCE[precision]


def test_fused_and_unfused_adamw_agree_on_cuda():
    result = fused_and_plain("adamw", ((256, 128), (128,)), CUDA, weight_decay=0.01)
    assert build_optimizer("adamw", result[True], CUDA, lr=1.0).defaults["fused"] is True  # the default
    for a, b in zip(result[True], result[False], strict=True):
        # PyTorch's own fp32 tolerances (rtol 1.3e-6, atol 1e-5): the fused kernel rounds differently,
        # a few ulp after five steps (1.4e-6 absolute on an H100); a wrong update is off by 1e-2.
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_cell_killed_after_a_snapshot_resumes_on_the_gpu(tmp_path, train_tiny, precision):
    straight = train_tiny(tmp_path / "straight", device="cuda", precision=precision)
    real_save = TrainingRun.save_snapshot

    def save_then_die(self, *args, **kwargs):
        real_save(self, *args, **kwargs)
        raise KeyboardInterrupt  # the job dies right after its first snapshot (step 4)

    TrainingRun.save_snapshot = save_then_die
    try:
        with pytest.raises(KeyboardInterrupt):
            train_tiny(tmp_path / "killed", device="cuda", precision=precision)
    finally:
        TrainingRun.save_snapshot = real_save
    resumed = train_tiny(tmp_path / "killed", device="cuda", precision=precision)
    assert resumed["resumed_from"] == [4] and resumed["precision"] == precision
    a, b = (load_file(tmp_path / name / "model/model.safetensors") for name in ("straight", "killed"))
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst <= RESUME_WEIGHT_TOLERANCE, worst
    assert resumed["best_dev_spearman"] == pytest.approx(straight["best_dev_spearman"], abs=0.5)


def test_a_checkpoint_encodes_the_same_on_gpu_and_cpu(tiny_bert, senteval_dir):
    """The evaluator's embeddings, not the fixture's STS scores: with 8 pairs per STS subset one swapped rank
    moves Spearman by points, so two fp32 encodings' scores need not agree to 0.01."""
    from contrastlab.cost import gpu_check
    from contrastlab.evaluation.senteval import load_sts_pairs

    pairs = load_sts_pairs(senteval_dir, "STSBenchmark", "test")
    worst = gpu_check.encoding_difference(tiny_bert, pairs.a + pairs.b, "cuda")
    assert worst <= gpu_check.EMBEDDING_TOLERANCE, worst


# -- the CUDA graph as the default step ------------------------------------------------------------------

PRECISIONS = ["bf16", "fp16", "tf32", "fp32"]


@pytest.fixture(scope="module")
def step_parts(tiny_bert, chunks):
    """``make_model`` (fresh copies of one tiny BERT + head, dropout 0.1) and static-shape batches."""
    import copy

    from contrastlab.training.capture import pad_to_width

    torch.manual_seed(0)
    model = sentence._load_model(tiny_bert, 0.1).to(CUDA).train()
    head, _ = sentence.build_head("simcse", "bert", model.config.hidden_size, 0.2)
    template = (model, head.to(CUDA).train())
    ids, mask = pad_to_width(*chunks[0], 32, 0)
    batches = [(ids.roll(k, dims=0), mask.roll(k, dims=0)) for k in range(4)]
    return (lambda: copy.deepcopy(template)), batches


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(
    "check, holds",
    [
        ("deterministic_check", "bit_equal"),  # under deterministic algorithms: bit-equal to eager
        ("spread_check", "within"),  # the default mode: within eager's own spread
    ],
)
def test_the_graph_is_the_eager_step(step_parts, precision, check, holds):
    from contrastlab.training import equivalence

    _skip_without_bf16(precision)
    make_model, batches = step_parts
    row = getattr(equivalence, check)(make_model, batches, precision=precision, device=CUDA)  # its steps
    assert row[holds], row


def test_the_default_on_cuda_is_the_graph_with_dev_batches_of_512(tmp_path, train_tiny):
    summary = train_tiny(tmp_path, device="cuda", precision="bf16")
    assert summary["settings"]["cuda_graph"] is True and summary["settings"]["dev_batch_size"] == 512


def test_a_step_that_cannot_be_captured_runs_eager_after_one_line(tmp_path, train_tiny, monkeypatch, capsys):
    infonce = build_loss("infonce")

    def reads_the_host(h1, h2, with_stats=False):  # a user's loss that asks the device a question
        out = infonce(h1, h2, with_stats=with_stats)
        if out.loss.item() > 1e9:
            raise AssertionError("unreachable")
        return out

    monkeypatch.setattr(sentence, "build_loss", lambda name, **hp: reads_the_host)
    # fp32 with the padded step (IEEE fp32 alone would take the padding-free eager step, no graph)
    summary = train_tiny(tmp_path, device="cuda", precision="fp32", padding_free=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cuda_graph:")]
    assert len(lines) == 1 and "cannot be captured" in lines[0], lines
    assert summary["settings"]["cuda_graph"] is False and summary["steps"] == 8


def test_deterministic_reruns_are_bit_identical_on_the_gpu(tmp_path, train_tiny):
    for name in ("a", "b"):
        train_tiny(tmp_path / name, device="cuda", precision="bf16", deterministic=True)
    a, b = (load_file(tmp_path / f"{name}/model/model.safetensors") for name in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "a/log.jsonl").read_text().count('"loss"') > 0


def test_the_default_for_ieee_fp32_on_cuda_is_the_padding_free_eager_step(tmp_path, train_tiny, capsys):
    summary = train_tiny(tmp_path, device="cuda", precision="fp32")
    assert summary["settings"]["padding_free"] is True and summary["settings"]["cuda_graph"] is False
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("padding_free: on")]
    assert len(lines) == 1 and summary["steps"] == 8, lines


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_padding_free_draws_the_padded_models_masks_on_cuda(arch):
    """IEEE fp32, dropout on, one seed: the padding-free forward's [CLS] states and gradients are the
    padded model's within fp32 rounding on the GPU too."""
    import copy

    from contrastlab.models.packed import packed_forward
    from contrastlab.models.text import attention_bias
    from contrastlab.precision import ieee_fp32
    from tests.models.test_packed import _batch, _model

    padded_model = _model(arch, dropout=0.2, hidden=64).to(CUDA).train()
    packed_model = copy.deepcopy(padded_model)
    ids, mask = (t.to(CUDA) for t in _batch(arch))
    with ieee_fp32():
        torch.manual_seed(3)
        ref = padded_model(ids, attention_mask=attention_bias(padded_model, mask)).last_hidden_state[:, 0]
        torch.manual_seed(3)
        got = packed_forward(packed_model, ids, mask).cls
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
        ref.square().sum().backward()
        got.square().sum().backward()
    for (name, a), (_, b) in zip(
        padded_model.named_parameters(), packed_model.named_parameters(), strict=True
    ):
        if a.grad is not None and not name.endswith("attention.self.key.bias"):  # a zero gradient
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5, msg=name)
