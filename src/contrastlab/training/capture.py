"""The sentence step's fast paths: static shapes, and the whole step as one CUDA graph.

Both are switches of :class:`~contrastlab.training.sentence.TrainSettings`; :func:`for_device` decides
the device-dependent defaults of either track (the graph on for CUDA, off elsewhere):

- ``static_shapes``: every batch padded to ``max_length`` (:func:`pad_to_width`). The loss trajectory
  is the dynamic-padding one wherever a batch already holds a ``max_length`` sentence; elsewhere more
  positions move the loss by rounding only (tests/training/test_capture.py).
- ``cuda_graph``: forward, backward, clipping, fp16's scaler and the fused ``capturable`` AdamW step
  captured once and replayed (:class:`CapturedStep`), one launch instead of the eager step's kernels.
  It needs static shapes, ``grad_accum: 1``, the 4D attention mask (no host sync:
  :func:`~contrastlab.models.text.attention_bias`) and a tensor learning rate. Under
  :func:`deterministic_algorithms` it is bit-equal to the eager step; by default within eager's own
  run-to-run spread (:mod:`contrastlab.training.equivalence`). A step that cannot be captured is named
  in one line by :func:`capture_or_eager` and the run goes on eagerly, on the run's own device.

The image step's graph (:mod:`contrastlab.training.vision_capture`) is a :class:`CapturedStep` too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from contrastlab import families


def pad_to_width(
    ids: torch.Tensor, mask: torch.Tensor, width: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` [n, w] padded on the right to [n, ``width``] with ``pad_id`` and mask 0.

    >>> ids, mask = pad_to_width(torch.tensor([[5, 6]]), torch.tensor([[1, 1]]), 4, 0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 0, 0]], [[1, 1, 0, 0]])
    """
    extra = width - ids.shape[1]
    if extra < 0:
        raise ValueError(f"a batch of width {ids.shape[1]} is wider than max_length {width}")
    if extra == 0:
        return ids, mask
    return F.pad(ids, (0, extra), value=pad_id), F.pad(mask, (0, extra), value=0)


def require_cuda(device: torch.device, what: str = "cuda_graph: true") -> None:
    """One line when a CUDA-only switch meets another device."""
    if device.type != "cuda":
        raise ValueError(
            f"{what} captures the step in a CUDA graph and needs a CUDA device, but this run is on "
            f"{device.type}; set cuda_graph: false (the eager step computes the same numbers)"
        )


#: cuBLAS workspace that makes its kernels deterministic (PyTorch's reproducibility notes), and the
#: values of ``CUBLAS_WORKSPACE_CONFIG`` that do (the other one uses less memory).
CUBLAS_DETERMINISTIC = ":4096:8"
CUBLAS_DETERMINISTIC_VALUES = (CUBLAS_DETERMINISTIC, ":16:8")


def for_device(
    settings: Any,
    device: torch.device,
    *,
    precision: str = "",
    model_type: str | None = None,
    n_images: int = 0,
) -> tuple[Any, list[str]]:
    """Either track's ``settings`` with the step mode decided for a run on ``device`` by
    :func:`contrastlab.families.step_mode` (the rule the plan prices by; the resolved ``precision`` and
    ``model_type`` for a sentence cell, the ``n_images`` trained on for an image cell), and its notes (one
    line each). Decided: ``cuda_graph``, and a sentence cell's ``padding_free`` and ``dev_batch_size``;
    explicit values are kept. An explicit ``cuda_graph: true`` the step cannot follow raises one line."""
    if settings.cuda_graph:
        require_cuda(device)
    track = settings.TRACK
    mode = families.step_mode(
        settings.to_dict(),
        track=track,
        device_type=device.type,
        precision=precision,
        model_type=model_type,
        n_images=n_images,
    )
    decided = {"cuda_graph": mode.graph}
    if track == "sentence":
        decided.update(dev_batch_size=mode.dev_batch, padding_free=mode.padding_free)
    return dataclasses.replace(settings, **decided), list(mode.notes)


@contextlib.contextmanager
def deterministic_algorithms(enabled: bool = True) -> Iterator[None]:
    """Deterministic kernels inside the block (``enabled``), as PyTorch's reproducibility notes ask:
    ``torch.use_deterministic_algorithms(True)``, cuDNN deterministic without its autotuner, and cuBLAS's
    deterministic workspace (:func:`require_cublas_workspace`). The previous state is restored
    afterwards, ``CUBLAS_WORKSPACE_CONFIG`` too unless CUDA has started meanwhile."""
    if not enabled:
        yield
        return
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )
    require_cublas_workspace()
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]
        # Once CUDA has started, cuBLAS may run with the value set here for the rest of the process:
        # unsetting it would only make the next deterministic block refuse what holds.
        if before[4] is None and not torch.cuda.is_initialized():
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def require_cublas_workspace() -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` at a deterministic value (:data:`CUBLAS_DETERMINISTIC_VALUES`), or a
    one-line error. cuBLAS reads the variable when CUDA first runs it (torch's own check reads it at
    each call, so a late value would pass unused): another value raises where CUDA has already started;
    where it has not, an unset variable is set to :data:`CUBLAS_DETERMINISTIC` and another is left to
    torch's check. The workflow's training job sets it before CUDA starts."""
    value = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if value in CUBLAS_DETERMINISTIC_VALUES:
        return
    if torch.cuda.is_initialized():
        found = "unset" if value is None else f"{value!r}"
        raise ValueError(
            f"deterministic: true needs CUBLAS_WORKSPACE_CONFIG={CUBLAS_DETERMINISTIC} (or :16:8) before "
            f"cuBLAS first runs, but it is {found} and CUDA has already started in this process; set it in "
            "the environment before the process starts (the workflow's training job does), or set "
            "deterministic: false"
        )
    if value is None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC


def cudnn_benchmark(wanted: bool) -> bool:
    """``torch.backends.cudnn.benchmark`` for settings that ask for ``wanted``: off under deterministic
    algorithms (the autotuner's fastest algorithm may change from run to run), else ``wanted``."""
    deterministic = torch.are_deterministic_algorithms_enabled() or torch.backends.cudnn.deterministic
    return bool(wanted) and not deterministic


def _restorer(tensors: Callable[[], Iterable[torch.Tensor]]) -> Callable[[], None]:
    """Copies of ``tensors()`` that warm-up and capture write into, and the function that puts them back in
    place afterwards (same storage: the graph keeps their addresses). State created during warm-up (a fresh
    optimizer's moments) is zeroed: that is the state a fresh optimizer starts from."""
    saved = {id(t): t.detach().clone() for t in tensors()}

    def restore() -> None:
        with torch.no_grad():
            for t in tensors():
                before = saved.get(id(t))
                t.copy_(before) if before is not None else t.zero_()

    return restore


class CapturedStep:
    """The whole training step as one CUDA graph, replayed per batch.

    ``body(*inputs)`` runs forward, backward and the optimiser step on the static input buffers and
    returns device tensors the graph rewrites at every replay; it leaves the gradients in place and
    never synchronises with the host. ``state()`` yields every tensor the step updates in place: warm-up
    and capture run the body four times, and these and the CUDA RNG are put back afterwards, so the first
    replay is the run's first real step. ``first``: a real batch's inputs for the warm-up.
    ``generators``: other CUDA generators the body draws from (the image step's augmentation), each
    registered with the graph so that every replay advances it as an eager step does. Build it after a
    resume (``load_state_dict`` replaces the tensors a graph would hold).
    """

    WARMUP = 3  # eager iterations on a side stream before capture (allocator, cuBLAS handles, state)

    def __init__(
        self,
        body: Callable[..., tuple],
        first: tuple[torch.Tensor, ...],
        state: Callable[[], Iterable[torch.Tensor]],
        zero_grad: Callable[[], None],
        device: torch.device,
        generators: tuple[torch.Generator, ...] = (),
    ) -> None:
        require_cuda(device)
        self.device = device
        self.inputs = tuple(x.to(device).clone() for x in first)
        restore, rng = _restorer(state), torch.cuda.get_rng_state(device)
        drawn = [(g, g.get_state()) for g in generators]  # each generator's state before the warm-up
        safe = [_graph_safe_rng(device), *(_graph_safe_rng(device, g) for g in generators)]
        # torch.cuda.graph takes its stream and memory pool on the current device: cuda:N's, not cuda:0's
        with torch.cuda.device(device):
            try:
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    for k in range(self.WARMUP):
                        zero_grad()
                        # the last warm-up under sync-debug "error": a host read fails here, not in capture
                        with _host_syncs_raise(k == self.WARMUP - 1):
                            body(*self.inputs)
                torch.cuda.current_stream(device).wait_stream(side)
                zero_grad()  # gradients allocated inside the capture, in the graph's memory pool
                self.graph = torch.cuda.CUDAGraph()
                for generator in generators:  # the default generator registers itself at capture_begin
                    self.graph.register_generator_state(generator)
                with torch.cuda.graph(self.graph):
                    self.outputs = body(*self.inputs)
            except BaseException:  # the eager run that follows a failed capture starts from the same state
                _recover(device, *safe)
                zero_grad()
                raise
            finally:
                restore()  # after a capture: state the warm-up created now exists and is zeroed
                torch.cuda.set_rng_state(rng, device)
                for generator, before in drawn:  # in place: the graph reads the state object it registered
                    generator.set_state(before)
            torch.cuda.synchronize(device)

    def __call__(self, *batch: torch.Tensor) -> tuple:
        """Copy a batch (host or device tensors of the captured shapes) into the static inputs, replay."""
        shapes, got = (tuple(tuple(x.shape) for x in tensors) for tensors in (self.inputs, batch))
        if got != shapes:
            raise ValueError(f"a captured step takes batches of shapes {shapes}, got {got}")
        with torch.cuda.device(self.device):  # the graph launches on the current device's stream
            for static, x in zip(self.inputs, batch, strict=True):
                static.copy_(x, non_blocking=True)
            self.graph.replay()
        return self.outputs


def _graph_safe_rng(device: torch.device, generator: torch.Generator | None = None):
    """(``generator``, by default the device's default CUDA generator, and a copy of its state taken
    outside any capture), or None where this torch lacks ``clone_state``: a capture that fails midway
    leaves the generator marked as capturing, and every later draw from it then fails ("Offset
    increment outside graph capture")."""
    if generator is None:
        generator = torch.cuda.default_generators[
            device.index if device.index is not None else torch.cuda.current_device()
        ]
    return (generator, generator.clone_state()) if hasattr(generator, "clone_state") else None


def _recover(device: torch.device, *generators) -> None:
    """After a failed capture: each generator's state (:func:`_graph_safe_rng`) put back outside
    capture, the device drained (an invalidated capture may report its error once more; that is the
    error already being raised)."""
    for generator in generators:
        if generator is not None:
            generator[0].graphsafe_set_state(generator[1])
    with contextlib.suppress(Exception):
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _host_syncs_raise(enabled: bool) -> Iterator[None]:
    """CUDA's sync debug mode at "error" inside the block (``enabled``): an op that synchronises with the
    host (``.item()``, a data-dependent shape) raises, as it would inside a capture, but before one."""
    if not enabled:
        yield
        return
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(before)


def sentence_update(run, train_step, parts, chunks, *, autocast, head_autocast, clip_norm, zero_grad=True):
    """One update of the sentence trainer on the encoder micro-batches ``chunks`` (``[(ids, mask), ...]``):
    ``train_step`` (:func:`contrastlab.training.sentence_step.train_step`, passed in as its caller names it,
    so that a test replacing ``sentence.train_step`` reaches this step) under the run's step context, without
    statistics (the trainer takes them at log steps only, after the step), then
    :meth:`~contrastlab.training.runtime.TrainingRun.optimizer_step`. ``parts`` = (encoder, head, loss_fn,
    optimizer, params). Returns (loss output, h1, h2, grad norm); no host sync."""
    encoder, head, loss_fn, optimizer, params = parts
    options = dict(autocast=autocast, with_stats=False, scale=run.scale, head_autocast=head_autocast)
    with run.step_context():
        out, h1, h2 = train_step(encoder, head, loss_fn, chunks, **options)
        grad_norm = run.optimizer_step(optimizer, params, clip_norm, zero_grad=zero_grad)
    return out, h1, h2, grad_norm


def capture_sentence_step(
    run, train_step, parts, first, *, head_autocast: bool, clip_norm: float
) -> CapturedStep:
    """:func:`sentence_update` on one batch as a :class:`CapturedStep` (:func:`prepare_capture`), the
    gradients left in place; ``parts`` as :func:`sentence_update` takes them. Called with a batch it returns
    (loss output, h1, h2, grad norm)."""
    model, head, _, optimizer, _ = parts
    options = dict(autocast=prepare_capture(run, optimizer), head_autocast=head_autocast, clip_norm=clip_norm)

    def body(ids, mask):
        return sentence_update(run, train_step, parts, [(ids, mask)], zero_grad=False, **options)

    zero_grad = functools.partial(optimizer.zero_grad, set_to_none=True)
    return CapturedStep(body, first, step_state(run, optimizer, model, head), zero_grad, run.device)


def prepare_capture(run, optimizer: torch.optim.Optimizer):
    """What a step needs before its capture, done once at set-up: the learning rate a device tensor
    (:func:`tensor_lr`), fp16's scale tensors created; returns the run's autocast without its cast
    cache (:func:`no_autocast_cache`), the one the captured body runs under."""
    tensor_lr(optimizer, run.device)
    if run.scaler.is_enabled():
        run.scaler.scale(torch.zeros((), device=run.device))  # creates the scaler's scale tensors
    return no_autocast_cache(run.autocast)


def step_state(run, optimizer: torch.optim.Optimizer, *modules: torch.nn.Module):
    """``state`` of :class:`CapturedStep` for a step that trains ``modules`` with ``optimizer`` under
    ``run``: their parameters and buffers, the optimiser's state tensors, the run's device counters."""

    def state():
        for module in modules:
            yield from itertools.chain(module.parameters(), module.buffers())
        for per_param in optimizer.state.values():
            yield from (v for v in per_param.values() if torch.is_tensor(v))
        yield from run.device_state()

    return state


def capture_or_eager(
    capture: Callable[[], CapturedStep], say: Callable[[str], None], *, compiled: bool = False
) -> CapturedStep | None:
    """``capture()``, or None where the step cannot be captured (a host read, a data-dependent shape, an
    op capture refuses: found at set-up, not hours in): then one line (``say``) names the cause and the
    run goes on with the eager step, its state put back. ``compiled``: the step runs a compiled encoder;
    the line says the run takes the uncompiled model's eager step, which the caller must give it."""
    try:
        return capture()
    except Exception as err:  # noqa: BLE001 (any capture failure leaves the eager step, which is correct)
        cause = " ".join(f"{type(err).__name__}: {err}".split())
        cause = cause if len(cause) <= 300 else cause[:297] + "..."
        what, instead = "step", "the eager step"
        if compiled:
            what, instead = "compiled step (compile: true)", "the eager step of the uncompiled model"
        say(f"cuda_graph: the {what} cannot be captured, so this run takes {instead} ({cause})")
        return None


def tensor_lr(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Each group's learning rate as a device tensor (a graph replays the value it finds in memory; the
    scheduler fills it in place between replays), and each group capturable (a resumed eager snapshot
    brings its own ``capturable: False``). One host read per group, at set-up."""
    for group in optimizer.param_groups:
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
        group["capturable"] = True


def compiled(model: torch.nn.Module, enabled: bool) -> torch.nn.Module:
    """``torch.compile(model)`` (TorchInductor, default mode) with ``enabled``, else ``model``. The
    compiled module shares the parameters; it draws dropout masks from Inductor's own RNG (same
    distribution, another stream than eager), so a compiled run's numbers are its own."""
    return torch.compile(model) if enabled else model


def no_autocast_cache(autocast: Callable[[], contextlib.AbstractContextManager]):
    """``autocast`` with its weight-cast cache off, as CUDA-graph capture needs (a cached cast made
    during capture would outlive the autocast region that owns it)."""

    def make():
        context = autocast()
        if isinstance(context, torch.autocast):
            return torch.autocast(context.device, dtype=context.fast_dtype, cache_enabled=False)
        return context

    return make
