"""The sentence step's fast paths (training.capture) on a tiny random BERT, CPU: the 4D mask and
static shapes give the dynamic-padding losses bit for bit; the step never syncs with the host; the
one-line errors; and, with CUDA stood in for, the fallbacks and device rules (C1, S1, C3)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import types

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from contrastlab.losses import build_loss
from contrastlab.training import capture
from contrastlab.training.runtime import TrainingRun, build_optimizer
from contrastlab.training.sentence import TrainSettings, build_head, train, train_step
from contrastlab.training.vision import VisionTrainSettings, train_vision

L, N, VOCAB = 16, 8, 200  # max_length, sentences per batch, vocabulary of the random BERT


def _bert(seed: int = 0, dropout: float = 0.1):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, initializer_range=0.2,
    )  # fmt: skip
    model = BertModel(config).train()
    head, _ = build_head("simcse", "bert", 32, 0.2)
    return model, head.train()


class _Mask2d(nn.Module):
    """The encoder as the step called it before: no ``config`` on the wrapper, so ``attention_bias``
    hands the 2D mask through and transformers builds the 4D one (asking ``padding_mask.all()``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **inputs):
        return self.model(**inputs)


def _batches(steps: int, full_width: bool, seed: int = 1):
    """Padded ``(ids, mask)`` batches of varied lengths, as wide as their longest sentence; with
    ``full_width`` every batch holds one max_length sentence (as wiki1m batches of 64 practically do)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        lengths = torch.randint(3, L + 1, (N,), generator=g)
        if full_width:
            lengths[0] = L
        width = int(lengths.max())
        ids = torch.zeros(N, width, dtype=torch.long)
        mask = torch.zeros(N, width, dtype=torch.long)
        for i, n in enumerate(lengths.tolist()):
            ids[i, :n] = torch.randint(1, VOCAB, (n,), generator=g)
            mask[i, :n] = 1
        out.append((ids, mask))
    return out


def _autocast(dtype):
    return (lambda: torch.autocast("cpu", dtype=dtype)) if dtype else contextlib.nullcontext


def _losses(batches, *, old_path: bool, static: bool, dtype=None, dropout=0.1) -> list[float]:
    model, head = _bert(dropout=dropout)
    params = [*model.parameters(), *head.parameters()]
    optimizer = build_optimizer("adamw", params, torch.device("cpu"), lr=1e-3)
    loss_fn, encoder = build_loss("infonce"), (_Mask2d(model) if old_path else model)
    torch.manual_seed(7)  # the dropout masks' stream
    losses = []
    for ids, mask in batches:
        if static:
            ids, mask = capture.pad_to_width(ids, mask, L, 0)
        out, _, _ = train_step(
            encoder, head, loss_fn, [(ids, mask)], autocast=_autocast(dtype), with_stats=False
        )
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
    return losses


@pytest.mark.parametrize("dtype, steps", [(None, 200), (torch.bfloat16, 40)])
def test_static_shapes_and_the_4d_mask_give_the_old_steps_losses_bit_for_bit(dtype, steps):
    batches = _batches(steps, full_width=True)
    old = _losses(batches, old_path=True, static=False, dtype=dtype)
    new = _losses(batches, old_path=False, static=True, dtype=dtype)
    assert new == old  # float equality of every step's loss, dropout on
    assert len(set(old)) > steps // 2  # the run trains (not a constant)


def test_padding_beyond_the_longest_sentence_moves_the_losses_by_rounding_only():
    # Narrower batches padded to max_length: masked keys add exact zeros to the attention, but the
    # reductions run over more positions (dropout off: the masks would be other draws too).
    batches = _batches(20, full_width=False)
    old = _losses(batches, old_path=True, static=False, dropout=0.0)
    new = _losses(batches, old_path=False, static=True, dropout=0.0)
    assert new == pytest.approx(old, rel=1e-5, abs=1e-6)
    assert _losses(batches, old_path=False, static=False, dropout=0.0) == old  # the 4D mask alone: exact


# ----------------------------------------------------------------------------------------- host syncs


class _SyncCounter(TorchDispatchMode):
    """Counts what would synchronise a CUDA stream with the host: scalar reads (``item``, ``bool``,
    ``int``: ``_local_scalar_dense``), ``nonzero``/``masked_select`` and boolean indexing (a size known
    only on the device), and ``tolist``/``numpy``/``cpu`` calls (patched while counting)."""

    SYNC_OPS = ("aten._local_scalar_dense", "aten.nonzero", "aten.masked_select")

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        bool_index = name.startswith("aten.index.Tensor") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else [])
        )
        if name.startswith(self.SYNC_OPS) or bool_index:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def counting(self, monkeypatch):
        for method in ("tolist", "numpy", "cpu"):
            original = getattr(torch.Tensor, method)

            def wrapped(tensor, *a, _original=original, _name=method, **k):
                self.calls.append(f"Tensor.{_name}")
                return _original(tensor, *a, **k)

            monkeypatch.setattr(torch.Tensor, method, wrapped)
        try:
            with self:
                yield self
        finally:
            monkeypatch.undo()


def _one_step(tmp_path, precision: str, *, old_path: bool = False, device: str = "cpu"):
    """One training step on ``device`` as a function (forward, backward, clip, fp16 unscale/skip/update,
    fused AdamW: the CUDA default optimiser, whose fp16 path keeps found_inf on the device), run once
    already, so that the optimiser's state and the scaler's tensors exist."""
    run = TrainingRun(
        tmp_path / precision, device=device, precision=precision, state_every=None, progress=False
    )
    device = run.device
    model, head = _bert()
    model.to(device), head.to(device)
    params = [*model.parameters(), *head.parameters()]
    optimizer = build_optimizer("adamw", params, device, fused=True, lr=1e-3)
    loss_fn, encoder = build_loss("infonce"), (_Mask2d(model) if old_path else model)
    ids, mask = (x.to(device) for x in _batches(1, full_width=False)[0])

    def step():  # the trainer's eager update (capture.sentence_update), its grad norm
        parts = (encoder, head, loss_fn, optimizer, params)
        options = dict(autocast=run.autocast, head_autocast=False, clip_norm=1.0)
        return capture.sentence_update(run, train_step, parts, [(ids, mask)], **options)[3]

    step()
    return step


def _one_step_syncs(tmp_path, monkeypatch, precision: str, old_path: bool) -> list[str]:
    """Sync-like calls in one training step (:func:`_one_step`), after a warm step."""
    step = _one_step(tmp_path, precision, old_path=old_path)
    with _SyncCounter().counting(monkeypatch) as counter:
        step()
    return counter.calls


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_step_never_syncs_with_the_host(tmp_path, monkeypatch, precision):
    assert _one_step_syncs(tmp_path, monkeypatch, precision, old_path=False) == []


def test_the_counter_catches_the_old_steps_mask_sync(tmp_path, monkeypatch):
    # transformers' padding_mask.all() per forward pass (the counter would pass a step that syncs otherwise)
    assert "aten._local_scalar_dense.default" in _one_step_syncs(tmp_path, monkeypatch, "fp32", old_path=True)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch.cuda.set_sync_debug_mode needs a CUDA device"
)
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_step_never_syncs_on_cuda(tmp_path, precision):
    step = _one_step(tmp_path, precision, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode("default")


# --------------------------------------------------------------------------------------------- switches


def test_cuda_graph_needs_one_encoder_pass_per_step():
    with pytest.raises(ValueError, match="cuda_graph captures one encoder pass per step; set grad_accum: 1"):
        TrainSettings(loss="infonce", cuda_graph=True, grad_accum=2)


@pytest.mark.parametrize("track", ["sentence", "vision"])
def test_cuda_graph_on_a_cpu_is_one_line_before_anything_loads(tmp_path, track):
    paths = dict(out_dir=tmp_path / "out", log_path=tmp_path / "log.jsonl", state_dir=tmp_path / "state")
    with pytest.raises(ValueError, match="cuda_graph: true .* needs a CUDA device, but this run is on cpu"):
        if track == "sentence":
            absent = dict(backbone_dir=tmp_path / "absent", corpus_path=tmp_path / "absent.txt")
            settings = TrainSettings(loss="infonce", cuda_graph=True)
            train(settings, **absent, dev_data_dir=tmp_path, **paths, device="cpu", progress=False)
        else:
            settings = VisionTrainSettings(dataset="cifar10", cuda_graph=True)
            train_vision(settings, data_root=tmp_path / "absent", **paths, device="cpu", progress=False)


def test_pad_to_width_refuses_a_batch_wider_than_max_length():
    with pytest.raises(ValueError, match="a batch of width 5 is wider than max_length 4"):
        capture.pad_to_width(torch.ones(1, 5, dtype=torch.long), torch.ones(1, 5, dtype=torch.long), 4, 0)


# ------------------------------------------------------------------ the graph path's CPU-testable parts


def test_restore_puts_tensors_back_in_place_and_zeroes_state_made_since():
    # CapturedStep's warm-up runs real optimiser steps; the first replay must be the run's first step.
    param = nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = torch.optim.AdamW([param], lr=0.1)

    def tensors():
        yield param
        for per_param in optimizer.state.values():
            yield from (v for v in per_param.values() if torch.is_tensor(v))

    restore, storage = capture._restorer(tensors), param.data_ptr()
    param.grad = torch.ones(2)
    optimizer.step()  # changes the parameter, creates exp_avg, exp_avg_sq, step
    restore()
    assert param.tolist() == [1.0, 2.0] and param.data_ptr() == storage
    assert all(float(v.abs().sum()) == 0 for v in tensors() if v is not param)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_the_scheduler_fills_the_tensor_lr_in_place():
    param = nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.AdamW([param], lr=3e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: max(0.0, (10 - k) / 10))
    capture.tensor_lr(optimizer, torch.device("cpu"))
    lr = optimizer.param_groups[0]["lr"]
    for k in range(1, 4):
        scheduler.step()
        assert optimizer.param_groups[0]["lr"] is lr  # the tensor a graph holds
        assert lr.item() == pytest.approx(3e-5 * (10 - k) / 10)


def test_capture_autocast_has_no_cast_cache():
    made = capture.no_autocast_cache(lambda: torch.autocast("cpu", dtype=torch.bfloat16))()
    assert made.fast_dtype == torch.bfloat16 and made._cache_enabled is False
    assert isinstance(capture.no_autocast_cache(contextlib.nullcontext)(), contextlib.nullcontext)


# -- the device-dependent defaults: the graph on for CUDA, the CPU run as it was -----------------------


_sentence = functools.partial(TrainSettings, loss="infonce")
_image = VisionTrainSettings
OAR_CELL = {"oar_fraction": 0.1, "optimizer": "sgd"}


def _decided(graph: bool, dev_batch: int) -> dict:
    return {"cuda_graph": graph, "dev_batch_size": dev_batch, "padding_free": False}


@pytest.mark.parametrize(
    ("settings", "device", "values", "n_images", "decided", "note"),
    [
        # the CPU run keeps what it always had: no CPU number moves
        (_sentence, "cpu", {}, 0, _decided(False, 128), None),
        (_sentence, "cuda", {}, 0, _decided(True, 512), None),
        (_sentence, "cuda", {"grad_accum": 2}, 0, _decided(False, 512), "grad_accum 2"),
        (_sentence, "cuda", {"cuda_graph": False, "dev_batch_size": 128}, 0, _decided(False, 128), None),
        (_sentence, "cpu", {"dev_batch_size": 512}, 0, _decided(False, 512), None),
        (_image, "cpu", {}, 512, {"cuda_graph": False}, None),
        (_image, "cuda", {}, 512, {"cuda_graph": True}, None),
        (_image, "cuda", {"cuda_graph": False}, 512, {"cuda_graph": False}, None),
        (_image, "cuda", OAR_CELL, 512, {"cuda_graph": False}, "OAR's labelled pass"),
        (_image, "cuda", {"compile": True}, 512, {"cuda_graph": False}, "compile: true"),
        (_image, "cuda", {"drop_last": False}, 500, {"cuda_graph": False}, "a last batch of 244 images"),
        (_image, "cuda", {"drop_last": False}, 512, {"cuda_graph": True}, None),  # all full
    ],
)
def test_for_device_decides_either_tracks_step_mode(settings, device, values, n_images, decided, note):
    configured = settings(**values)
    got, notes = capture.for_device(configured, torch.device(device), n_images=n_images)
    assert got == dataclasses.replace(configured, **decided)  # nothing else decided
    assert notes == [] if note is None else (len(notes) == 1 and note in notes[0] and "\n" not in notes[0])


def test_a_step_that_cannot_be_captured_is_named_in_one_line_and_runs_eager():
    said = []

    def capture_fails():
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors")

    assert capture.capture_or_eager(capture_fails, said.append) is None
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("cuda_graph: the step cannot be captured, so this run takes the eager step")
    assert "operation not permitted when stream is capturing" in said[0]
    assert capture.capture_or_eager(lambda: "graph", said.append) == "graph" and len(said) == 1


# -- C1: a compiled step whose capture fails trains the plain model eagerly ---------------------------


class _CompiledAfterAFailedCapture(nn.Module):
    """The compiled encoder as a failed capture may leave it: it fails whenever it runs."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.config = model, model.config

    def forward(self, **inputs):
        raise RuntimeError("the compiled module ran after its capture failed")


def test_a_compiled_step_that_cannot_be_captured_trains_the_plain_model_eagerly(
    tmp_path, train_tiny, monkeypatch, capsys
):
    """compile + a failed capture: one line naming compile, then the uncompiled model's eager step."""
    from contrastlab.training import sentence

    def capture_fails(*args, **kwargs):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def cpu_optimizer(kind, params, device, *, capturable=False, **hp):
        return build_optimizer(kind, params, device, **hp)

    monkeypatch.setattr(capture, "require_cuda", lambda device, what="": None)
    monkeypatch.setattr(capture, "capture_sentence_step", capture_fails)
    monkeypatch.setattr(
        capture, "compiled", lambda model, enabled: _CompiledAfterAFailedCapture(model) if enabled else model
    )
    monkeypatch.setattr(sentence, "build_optimizer", cpu_optimizer)
    summary = train_tiny(tmp_path, compile=True, cuda_graph=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cuda_graph:")]
    assert len(lines) == 1 and "compile" in lines[0] and "cannot be captured" in lines[0], lines
    assert "uncompiled model" in lines[0] and "operation not permitted when stream is capturing" in lines[0]
    assert summary["settings"]["cuda_graph"] is False and summary["settings"]["compile"] is False
    assert summary["steps"] == 8


# -- S1: capture and replay on the run's device, whatever device is current --------------------------


class _FakeInput:
    """A static input buffer of the captured step (a CUDA tensor on a GPU)."""

    shape = (2, 4)

    def to(self, device):
        return self

    def clone(self):
        return _FakeInput()

    def copy_(self, x, non_blocking=False):
        return self


def _record_current_device(monkeypatch) -> tuple[list[tuple[str, int]], list[int]]:
    """Stand-ins for what :class:`capture.CapturedStep` asks of ``torch.cuda``, on a machine without
    one; returns ``(seen, current)``. ``torch.cuda.device(d)`` makes d's index ``current[0]`` inside its
    block (0 outside any, as in a fresh process). ``seen`` gets ("start", index) now, then the capture's
    start and each replay with the index current then (the test's step body adds its own calls)."""
    current = [0]
    seen: list[tuple[str, int]] = []

    @contextlib.contextmanager
    def device(where):
        before, current[0] = current[0], torch.device(where).index
        try:
            yield
        finally:
            current[0] = before

    class Stream:
        def __init__(self, device=None) -> None:
            pass

        def wait_stream(self, other) -> None:
            pass

    class Graph:
        def register_generator_state(self, generator) -> None:
            pass

        def replay(self) -> None:
            seen.append(("replay", current[0]))

    @contextlib.contextmanager
    def graph(captured):
        seen.append(("capture", current[0]))
        yield

    cuda = capture.torch.cuda
    monkeypatch.setattr(cuda, "device", device)
    monkeypatch.setattr(cuda, "Stream", Stream)
    monkeypatch.setattr(cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(cuda, "graph", graph)
    monkeypatch.setattr(cuda, "get_rng_state", lambda device=None: torch.zeros(1))
    monkeypatch.setattr(cuda, "set_rng_state", lambda state, device=None: None)
    monkeypatch.setattr(cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(capture, "_graph_safe_rng", lambda device, generator=None: None)
    monkeypatch.setattr(capture, "_host_syncs_raise", lambda enabled: contextlib.nullcontext())
    seen.append(("start", current[0]))
    return seen, current


def test_the_step_is_captured_and_replayed_on_the_runs_device_not_the_current_one(monkeypatch):
    seen, current = _record_current_device(monkeypatch)

    def body(x):
        seen.append(("body", current[0]))
        return (x,)

    step = capture.CapturedStep(body, (_FakeInput(),), lambda: (), lambda: None, torch.device("cuda", 1))
    step(_FakeInput())
    warmup = [("body", 1)] * capture.CapturedStep.WARMUP
    assert seen == [("start", 0), *warmup, ("capture", 1), ("body", 1), ("replay", 1)]
    assert current[0] == 0  # the current device is the caller's again between steps


def _without_cublas_setting(monkeypatch) -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` unset for the test and put back after it, whoever sets it meanwhile."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")  # records the variable's state before the test
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")


def test_deterministic_algorithms_switch_on_inside_and_restore_after(monkeypatch):
    # CUDA not started: the variable set now is the one cuBLAS reads when it starts; put back after
    # only where CUDA has still not started (else cuBLAS runs with it for the rest of the process)
    _without_cublas_setting(monkeypatch)
    monkeypatch.setattr(capture.torch.cuda, "is_initialized", lambda: False)
    assert not torch.are_deterministic_algorithms_enabled()
    with capture.deterministic_algorithms(True):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert not torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    with capture.deterministic_algorithms(True):
        monkeypatch.setattr(capture.torch.cuda, "is_initialized", lambda: True)  # cuBLAS started inside
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    with capture.deterministic_algorithms(False):
        assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("value", [None, "", ":0:0", "4096:8"])
def test_deterministic_refuses_a_process_whose_cublas_may_have_started_without_its_setting(
    monkeypatch, value
):
    # cuBLAS reads CUBLAS_WORKSPACE_CONFIG once, when CUDA first runs it: set later, it is not used,
    # and torch's own check (which reads the variable at each call) would pass a run that is not
    # deterministic
    monkeypatch.setattr(capture.torch.cuda, "is_initialized", lambda: True)
    _without_cublas_setting(monkeypatch)
    if value is not None:
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", value)
    with pytest.raises(ValueError) as refused:
        with capture.deterministic_algorithms(True):
            pass
    line = str(refused.value)
    assert "\n" not in line and "CUBLAS_WORKSPACE_CONFIG=:4096:8" in line
    assert "set it in the environment before the process starts" in line
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == value  # left as it was
    assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("value", [":4096:8", ":16:8"])
def test_deterministic_takes_a_valid_setting_from_the_environment_as_it_is(monkeypatch, value):
    monkeypatch.setattr(capture.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", value)
    with capture.deterministic_algorithms(True):
        assert torch.are_deterministic_algorithms_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == value
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == value


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_deterministic_cells_training_job_sets_cublas_before_torch_touches_cuda(
    tmp_path, monkeypatch, deterministic
):
    from contrastlab.workflow import job

    _without_cublas_setting(monkeypatch)
    seen = {}

    def job_device(snakemake):  # the frame's first step that may touch CUDA
        seen["at job_device"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        return "cpu"

    monkeypatch.setattr(job, "job_device", job_device)
    monkeypatch.setattr(job, "stderr_to_log", lambda path: None)  # keeps this process's fd 2
    monkeypatch.setattr(job, "job_inputs", lambda snakemake: {})
    monkeypatch.setattr(job, "note_inputs", lambda inputs: None)
    monkeypatch.setattr(job, "job_data_locations", lambda snakemake: {})
    monkeypatch.setattr(job, "record_job", lambda snakemake: None)
    settings = {"loss": "infonce", "deterministic": deterministic}
    snakemake = types.SimpleNamespace(
        log=[str(tmp_path / "train.log")], rule="train", wildcards={}, threads=1, config={}, output=[],
        params=types.SimpleNamespace(settings=settings),
    )  # fmt: skip
    with job.training_job(snakemake) as (device, _):
        assert device == "cpu"
    assert seen["at job_device"] == (":4096:8" if deterministic else None)
