"""Every precision path of the training runtime, run on the CPU (PyTorch 2.14 runs bf16/fp16 autocast,
``GradScaler("cpu")`` and fused optimisers there): what a GPU run would execute, checked without one."""

from __future__ import annotations

import contextlib
import dataclasses
import re

import pytest
import torch

from contrastlab.config import load_schema
from contrastlab.cost import flops
from contrastlab.evaluation.vision import extract_features
from contrastlab.losses import build_loss
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.precision import CHOICES, fp32_mode_now, set_fp32_mode
from contrastlab.training import runtime, sentence
from contrastlab.training import vision as vision_training
from contrastlab.training.runtime import (
    FP16_MAX_CONSECUTIVE_SKIPS,
    NonFiniteLossError,
    Precision,
    SnapshotMismatchError,
    TrainingRun,
    build_optimizer,
)
from contrastlab.training.sentence import TrainSettings
from contrastlab.training.settings import fingerprint_settings
from contrastlab.training.vision import VisionTrainSettings
from contrastlab.workflow.job import is_deterministic_failure

CPU = torch.device("cpu")
#: |bf16 step loss - fp32 step loss| bound for the tiny models below: bf16 keeps 8 bits of mantissa
#: (relative rounding 2**-9 = 0.002 per operation); the losses are about log(2N) = 3.5, and a dozen
#: layers of rounding stay well inside 0.05.
BF16_LOSS_TOLERANCE = 0.05


@contextlib.contextmanager
def _dtypes_of(*modules: torch.nn.Module):
    """Per module, the output dtype of each of its Linear and Conv2d submodules in the forward passes run
    inside the block."""
    seen: list[dict[str, torch.dtype]] = [{} for _ in modules]
    handles = [
        m.register_forward_hook(lambda mod, args, out, name=name, to=to: to.__setitem__(name, out.dtype))
        for module, to in zip(modules, seen, strict=True)
        for name, m in module.named_modules()
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))
    ]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def _sentence_step(tiny_bert, chunks, precision: str, *, head_autocast=False, dropout=0.0):
    """One training step from the same seeded weights; returns (loss output, h1, encoder/head dtypes)."""
    torch.manual_seed(0)
    model = sentence._load_model(tiny_bert, dropout).train()
    head, _ = sentence.build_head("simcse", "bert", model.config.hidden_size, 0.2)
    p = Precision.resolve(precision, CPU)
    with _dtypes_of(model, head) as (encoder_dtypes, head_dtypes), p.step():
        options = dict(autocast=p.autocast, with_stats=False, head_autocast=head_autocast)
        out, h1, _ = sentence.train_step(model, head, build_loss("infonce"), chunks, **options)
    return out, h1, encoder_dtypes, head_dtypes


def test_bf16_sentence_step_runs_the_encoder_in_bf16_and_head_and_loss_in_fp32(tiny_bert, tokenized):
    tokenizer, cached = tokenized
    chunks = [cached.batch(torch.arange(16).numpy(), tokenizer.pad_token_id)]
    ref, _, ref_encoder, _ = _sentence_step(tiny_bert, chunks, "fp32")
    out, h1, encoder, head = _sentence_step(tiny_bert, chunks, "bf16")
    assert set(ref_encoder.values()) == {torch.float32}
    assert set(encoder.values()) == {torch.bfloat16}  # every Linear of the encoder ran in bf16
    assert set(head.values()) == {torch.float32} and h1.dtype == torch.float32  # head outside autocast
    assert out.loss.dtype == torch.float32 and torch.isfinite(out.loss)
    assert abs(out.loss.item() - ref.loss.item()) < BF16_LOSS_TOLERANCE
    assert out.loss.item() != ref.loss.item()  # it really ran in another precision
    # SimCSE's --fp16 cells put the head under autocast too (head_autocast).
    _, h1, _, head = _sentence_step(tiny_bert, chunks, "bf16", head_autocast=True)
    assert set(head.values()) == {torch.bfloat16} and h1.dtype == torch.float32


def _vision_step(precision: str, channels_last=False):
    """One SGD step of a ResNet-18 and its head from seeded weights; returns (loss output, h1, encoder and
    head dtypes, the encoder)."""
    torch.manual_seed(0)
    # Width 8: PyTorch 2.14's CPU channels-last convolutions corrupt the heap at width 4 with one
    # thread ("corrupted size vs. prev_size"); widths 8 and 16 run clean.
    encoder = build_encoder("resnet18", width=8)
    head = ProjectionHead(encoder.feature_dim, 32, 16).train()
    memory = torch.channels_last if channels_last else torch.contiguous_format
    encoder.to(memory_format=memory).train()
    generator = torch.Generator().manual_seed(1)
    v1, v2 = (torch.randn(8, 3, 16, 16, generator=generator) for _ in range(2))
    p = Precision.resolve(precision, CPU)
    params = [*encoder.parameters(), *head.parameters()]
    optimizer = build_optimizer("sgd", params, CPU, lr=0.1)
    with _dtypes_of(encoder, head) as (dtypes, head_dtypes), p.step():
        options = dict(autocast=p.autocast, memory_format=memory, with_stats=False)
        out, h1, _, _ = vision_training.train_step(
            encoder, head, build_loss("ntxent", tau=0.5), v1, v2, **options
        )
        optimizer.step()
    return out, h1, dtypes, head_dtypes, encoder


def test_bf16_vision_step_runs_the_convolutions_in_bf16_and_head_and_loss_in_fp32():
    ref, *_ = _vision_step("fp32")
    out, h1, dtypes, head_dtypes, _ = _vision_step("bf16")
    convs = {name: dtype for name, dtype in dtypes.items() if "conv" in name}
    assert convs and set(convs.values()) == {torch.bfloat16}
    assert set(head_dtypes.values()) == {torch.float32} and h1.dtype == torch.float32
    assert out.loss.dtype == torch.float32 and torch.isfinite(out.loss)
    assert abs(out.loss.item() - ref.loss.item()) < BF16_LOSS_TOLERANCE


def test_channels_last_vision_step_equals_the_contiguous_one():
    a_out, _, _, _, a = _vision_step("fp32", channels_last=False)
    b_out, _, _, _, b = _vision_step("fp32", channels_last=True)
    torch.testing.assert_close(a_out.loss, b_out.loss, rtol=0, atol=1e-5)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize(
    "kind, hp", [("adamw", {"weight_decay": 0.01}), ("adam", {}), ("sgd", {"momentum": 0.9})]
)
def test_fused_and_unfused_optimisers_agree_after_several_steps(kind, hp):
    result = fused_and_plain(kind, ((64, 32), (32,), (7, 3, 3, 3)), CPU, **hp)
    for fused_p, plain_p in zip(result[True], result[False], strict=True):
        assert (fused_p - plain_p).abs().max().item() <= 1e-6


def fused_and_plain(kind: str, shapes, device: torch.device, **hp) -> dict[bool, list]:
    """The parameters of ``shapes`` after five steps of ``kind`` (lr 1e-2) on the same random gradients,
    with the fused kernel (``True``) and without (``False``)."""
    generator = torch.Generator(device=device).manual_seed(0)
    start = [torch.randn(shape, generator=generator, device=device) for shape in shapes]
    grads = [[torch.randn(p.shape, generator=generator, device=device) for p in start] for _ in range(5)]
    result = {}
    for fused in (True, False):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        optimizer = build_optimizer(kind, params, device, fused=fused, lr=1e-2, **hp)
        assert optimizer.defaults["fused"] is fused
        for step_grads in grads:
            for p, g in zip(params, step_grads, strict=True):
                p.grad = g.clone()
            optimizer.step()
        result[fused] = params
    return result


def test_default_optimiser_is_fused_on_cuda_and_plain_on_cpu():
    p = [torch.nn.Parameter(torch.zeros(2))]
    assert build_optimizer("adamw", p, CPU, lr=1.0).defaults["fused"] is None
    with pytest.raises(ValueError, match="optimizer must be one of adamw, adam, sgd"):
        build_optimizer("lamb", p, CPU, lr=1.0)


# ---------------------------------------------------------------------------------------- fp16 scaling


def _tiny_run(tmp_path, precision="fp16"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
    run = TrainingRun(tmp_path / "state", device="cpu", precision=precision, state_every=2, progress=False)
    params = list(model.parameters())
    optimizer = build_optimizer("adamw", params, CPU, lr=1e-2)
    return run, model, params, optimizer


def _backward(run, model, x, poison=False):
    with run.step_context():
        with run.autocast():
            out = model(x)
        loss = out.float().pow(2).mean()
        handle = model[0].weight.register_hook(lambda g: g * float("inf")) if poison else None
        run.scale(loss).backward()
        if handle:
            handle.remove()
    return loss


def test_fp16_overflow_skips_the_step_halves_the_scale_and_counts_it(tmp_path):
    run, model, params, optimizer = _tiny_run(tmp_path)
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(3))
    assert run.precision.name == "fp16" and run.scaler.is_enabled() and run.scaler.get_scale() == 2.0**16
    before = [p.detach().clone() for p in params]
    loss = _backward(run, model, x, poison=True)  # a gradient overflows (the loss itself is finite)
    assert torch.isfinite(loss)
    run.optimizer_step(optimizer, params, clip_norm=1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, params, strict=True))  # bit-unchanged
    assert run.scaler.get_scale() == 2.0**15 and run.skipped_steps == 1
    _backward(run, model, x)  # a clean step trains and resets the run of skips
    run.optimizer_step(optimizer, params, clip_norm=1.0)
    assert not all(torch.equal(a, b) for a, b in zip(before, params, strict=True))
    assert run.skipped_steps == 1 and run.skips_in_a_row == 0


def test_fp16_stops_after_the_stated_number_of_consecutive_skips(tmp_path):
    run, model, params, optimizer = _tiny_run(tmp_path)
    x = torch.randn(16, 8)
    with pytest.raises(NonFiniteLossError, match=f"skipped {FP16_MAX_CONSECUTIVE_SKIPS} steps in a row"):
        for step in range(1, FP16_MAX_CONSECUTIVE_SKIPS + 1):
            loss = _backward(run, model, x, poison=True)
            run.optimizer_step(optimizer, params, clip_norm=1.0)
            # the skips are counted on the device and read where the run checks its loss anyway
            run.check_finite(step, loss, syncs=True, what="loss", stats=lambda: "")
            assert run.skips_in_a_row == step
    assert run.skipped_steps == FP16_MAX_CONSECUTIVE_SKIPS


def test_fp16_clips_the_unscaled_gradients(tmp_path):
    """The gradient norm the clip sees is the true one (unscale first), not 65536 times it."""
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(4))
    norms = {}
    for precision in ("fp16", "fp32"):
        run, model, params, optimizer = _tiny_run(tmp_path / precision, precision)
        _backward(run, model, x)
        norms[precision] = run.optimizer_step(optimizer, params, clip_norm=1e-3).item()
    assert norms["fp16"] == pytest.approx(norms["fp32"], rel=1e-2)


# ------------------------------------------------------------------------------------ switches, snapshots


def test_each_precision_sets_both_fp32_switches_for_the_step_only():
    tf32 = Precision("tf32", "tf32", "cuda")  # what a CUDA run resolves tf32 to
    with tf32.step():
        assert fp32_mode_now() == {"matmul": "tf32", "conv": "tf32"}
    assert fp32_mode_now() == {"matmul": "ieee", "conv": "ieee"}  # dev evaluation: IEEE fp32
    for name in ("fp32", "bf16", "fp16"):
        with Precision(name, name, "cuda").step():
            # cuDNN's own default is TF32 convolutions: "fp32" must switch it off explicitly.
            assert fp32_mode_now() == {"matmul": "ieee", "conv": "ieee"}
    record = tf32.record()
    assert record["tf32_matmul"] and record["tf32_conv"] and record["precision"] == "tf32"
    assert Precision.resolve("tf32", CPU).record()["tf32_matmul"] is False  # no TF32 on a CPU


class _RecordsFp32Mode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: list[dict[str, str]] = []

    def forward(self, x):
        self.seen.append(fp32_mode_now())
        return x.flatten(1)


def test_image_features_are_extracted_in_ieee_fp32_and_the_callers_switches_come_back():
    encoder = _RecordsFp32Mode()
    set_fp32_mode("tf32")  # e.g. left on by a tf32 training step, or cuDNN's own TF32 default
    try:
        images = torch.zeros(4, 3, 8, 8, dtype=torch.uint8)
        features = extract_features(
            encoder, images, size=8, mean=[0.5] * 3, std=[0.5] * 3, batch_size=2, device=CPU
        )
        assert features.shape == (4, 192)
        assert encoder.seen == [{"matmul": "ieee", "conv": "ieee"}] * 2
        assert fp32_mode_now() == {"matmul": "tf32", "conv": "tf32"}
    finally:
        set_fp32_mode("ieee")


def _snapshot(tmp_path, precision: str):
    run, model, params, optimizer = _tiny_run(tmp_path, precision)
    run.begin(None, {}, {"settings": {}})
    run.save_snapshot(2, "fingerprint", {"model": model, "optimizer": optimizer}, {})
    run.wait_for_snapshot()  # written in the background
    return run


@pytest.mark.fault(
    "resume of a snapshot written on another device type or in another precision",
    "stops with one line naming both; the snapshot is kept",
)
def test_a_snapshot_of_another_precision_or_device_stops_with_one_line(tmp_path, observed):
    _snapshot(tmp_path, "fp16")
    other = TrainingRun(tmp_path / "state", device="cpu", precision="fp32", state_every=2, progress=False)
    with pytest.raises(
        SnapshotMismatchError, match="written on cpu in fp16, this run is on cpu in fp32"
    ) as err:
        other.load_snapshot("fingerprint")
    assert "\n" not in str(err.value) and is_deterministic_failure(err.value)  # never retried
    assert (tmp_path / "state" / "state.pt").exists()
    # A snapshot written on CUDA (its runtime key), resumed on a CPU.
    payload = torch.load(tmp_path / "state" / "state.pt", weights_only=False)
    payload["runtime"] = {"device_type": "cuda", "precision": "fp16"}
    torch.save(payload, tmp_path / "state" / "state.pt")
    fp16 = TrainingRun(tmp_path / "state", device="cpu", precision="fp16", state_every=2, progress=False)
    with pytest.raises(SnapshotMismatchError, match="written on cuda in fp16, this run is on cpu in fp16"):
        fp16.load_snapshot("fingerprint")
    observed(str(err.value)[:100])


def test_the_snapshot_keeps_the_loss_scaler_state(tmp_path):
    run = _snapshot(tmp_path, "fp16")
    payload = torch.load(tmp_path / "state" / "state.pt", weights_only=False)
    assert payload["scaler"]["scale"] == 2.0**16 and payload["runtime"] == run.runtime_key()
    payload["scaler"]["scale"] = 8.0  # as after a dozen skipped steps
    torch.save(payload, tmp_path / "state" / "state.pt")
    resumed = TrainingRun(tmp_path / "state", device="cpu", precision="fp16", state_every=2, progress=False)
    _, model, _, optimizer = _tiny_run(tmp_path / "other")
    saved = resumed.load_snapshot("fingerprint")
    assert resumed.begin(saved, {"model": model, "optimizer": optimizer}, {}) == 2
    assert resumed.scaler.get_scale() == 8.0 and resumed.resumed_from == [2]


def test_snapshots_are_due_by_steps_and_or_by_minutes():
    now = [0.0]
    common = dict(device="cpu", precision="fp32", state_minutes=10, progress=False, clock=lambda: now[0])
    by_time = TrainingRun("unused", state_every=None, **common)
    assert not by_time.snapshot_due(1, 100)
    now[0] = 599.0
    assert not by_time.snapshot_due(2, 100)
    now[0] = 600.0
    assert by_time.snapshot_due(3, 100) and not by_time.snapshot_due(100, 100)  # never at the last step
    both = TrainingRun("unused", state_every=4, **common)
    assert [s for s in range(1, 10) if both.snapshot_due(s, 10)] == [4, 8]
    now[0] = 1200.0
    assert both.snapshot_due(5, 10)


def test_one_list_of_precisions_for_the_schema_the_runtime_and_the_plan():
    schema = load_schema()
    defs = schema["$defs"]
    assert defs["training"]["properties"]["precision"]["enum"] == list(CHOICES)
    assert defs["vision_training"]["properties"]["precision"]["enum"] == list(CHOICES)
    assert set(schema["properties"]["precision_override"]["enum"]) == {*CHOICES, None}
    assert not hasattr(runtime, "PRECISIONS") and not hasattr(flops, "PRECISIONS")  # one list, no aliases
    # one rule for auto: the plan prices the calibrated GPU (CUDA, native bf16) as the runtime would
    assert flops._resolved("auto") == flops._resolved(None) == "bf16"
    assert runtime.resolve_precision("auto", CPU) == "fp32"


def test_training_settings_take_their_defaults_and_bounds_from_the_schema():
    defs = load_schema()["$defs"]
    for cls, key in ((TrainSettings, "training"), (VisionTrainSettings, "vision_training")):
        properties = defs[key]["properties"]
        for f in dataclasses.fields(cls):
            if f.name in properties and "default" in properties[f.name]:
                default = f.default_factory() if f.default is dataclasses.MISSING else f.default
                wanted = properties[f.name]["default"]
                assert (list(default) if isinstance(default, tuple) else default) == wanted, (key, f.name)
    # the schema's bounds hold, and the checks of the code's own
    for bad, message in (
        ({"max_length": 3}, "max_length must be >= 4, got 3"),
        ({"dropout": 0.95}, "dropout must be <= 0.9, got 0.95"),
        ({"max_sentences": 1}, "max_sentences must be >= 2 or None, got 1"),
        ({"state_minutes": 0}, "state_minutes must be > 0"),
        ({"head_autocast": "yes"}, "head_autocast must be true or false"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            TrainSettings(loss="infonce", **bad)
    for name in CHOICES:  # every precision and snapshot rule is accepted
        TrainSettings(loss="infonce", precision=name)
        VisionTrainSettings(precision=name)
    TrainSettings(loss="infonce", state_every=None, state_minutes=10.0)
    with pytest.raises(ValueError, match=re.escape("momentum must be < 1, got 1.0")):
        VisionTrainSettings(loss="ntxent", arch="resnet18", dataset="digits", momentum=1.0)


def test_settings_added_after_snapshots_count_in_the_fingerprint_only_when_set():
    """A snapshot written before a setting existed resumes while the setting holds its default."""
    later = {"compile": False}
    assert fingerprint_settings({"lr": 1, "compile": False, "tensorboard": True}, later) == {"lr": 1}
    assert fingerprint_settings({"lr": 1, "compile": True}, later) == {"lr": 1, "compile": True}
    either = {"cuda_graph": frozenset({None, False})}  # a default that became device-dependent
    assert fingerprint_settings({"lr": 1, "cuda_graph": None}, either) == {"lr": 1}
    assert fingerprint_settings({"lr": 1, "cuda_graph": False}, either) == {"lr": 1}
    assert fingerprint_settings({"lr": 1, "cuda_graph": True}, either) == {"lr": 1, "cuda_graph": True}
    for module, settings in ((sentence, TrainSettings), (vision_training, VisionTrainSettings)):
        defaults = {f.name: f.default for f in dataclasses.fields(settings)}
        for key, default in module.LATER_DEFAULTS.items():
            assert defaults[key] in default if isinstance(default, frozenset) else defaults[key] == default
    # The sentence settings fingerprinted before the device-dependent defaults (cuda_graph false, dev
    # batches of 128, no deterministic key) and today's give one fingerprint: an interrupted cell resumes.
    today, later = TrainSettings(loss="infonce").to_dict(), sentence.LATER_DEFAULTS
    before = {k: v for k, v in today.items() if k != "deterministic"}
    before.update(cuda_graph=False, dev_batch_size=128)
    assert fingerprint_settings(today, later) == fingerprint_settings(before, later)
    chosen = TrainSettings(loss="infonce", deterministic=True, cuda_graph=True).to_dict()
    assert {"deterministic", "cuda_graph"} <= set(fingerprint_settings(chosen, later))
    # An image snapshot written before cuda_graph existed resumes under today's default (None) and an
    # explicit false; an explicit true is a run of its own.
    today, later = VisionTrainSettings().to_dict(), vision_training.LATER_DEFAULTS
    old = fingerprint_settings({k: v for k, v in today.items() if k != "cuda_graph"}, later)
    assert today["cuda_graph"] is None
    for value in (None, False):
        assert fingerprint_settings({**today, "cuda_graph": value}, later) == old
    assert "cuda_graph" in fingerprint_settings({**today, "cuda_graph": True}, later)
