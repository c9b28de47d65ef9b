"""What every trainer needs, written once: device, precision, the optimiser step, snapshots and resume,
the non-finite-loss policy, interval logging and timings. Both trainers are tracks of the one loop
(:mod:`.loop`), which drives a :class:`TrainingRun`.

Precision is one explicit choice, resolved once per run and recorded in its summary
(:meth:`Precision.record`):

- ``fp32``: IEEE fp32 matrix products *and* convolutions (PyTorch's defaults would run cuDNN
  convolutions in TF32, making "fp32" mean TF32 for the vision track only).
- ``tf32``: TF32 matrix products and convolutions inside the training step only (dev evaluation stays
  IEEE fp32). On a CPU: ``fp32``.
- ``bf16``: bf16 autocast of the encoder; head and loss in fp32 (unless ``head_autocast``).
- ``fp16``: fp16 autocast with dynamic loss scaling (SimCSE's ``--fp16``). A step whose scaled
  gradients overflow is skipped and counted; the run stops when the fp32 loss is not finite, or after
  :data:`FP16_MAX_CONSECUTIVE_SKIPS` skips in a row.
- ``auto``: ``bf16`` on a CUDA device with native bf16, ``fp32`` elsewhere.

Snapshots (model, optimiser, scheduler, loss scaler, every RNG, the log offset and interval) are written
every ``state_every`` steps and/or ``state_minutes`` minutes, whichever comes first. Each records its
device type and precision; resuming under others stops with one line naming both
(:class:`SnapshotMismatchError`). On a CPU a resumed run is bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.models import pick_device
from contrastlab.precision import resolve, set_fp32_mode
from contrastlab.training import capture
from contrastlab.training import state as st
from contrastlab.training.events import TensorBoardLog, WandbLog, WandbRun, default_events_dir
from contrastlab.training.phases import Phases
from contrastlab.training.snapshots import HostBuffers, SnapshotWriter, note_submitted

#: Skipped fp16 steps in a row after which the run stops: the scale has fallen by 2**20 (from 65536 to
#: 0.06), so the gradients overflow at any scale and further steps would only skip.
FP16_MAX_CONSECUTIVE_SKIPS = 20
OPTIMIZERS = ("adamw", "adam", "sgd")


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (or fp16 loss scaling could not find a finite scale)."""


class SnapshotMismatchError(ValueError):
    """A snapshot of the same cell written under another device type or precision."""


# ---------------------------------------------------------------------------------------------- precision


def resolve_precision(requested: str, device: torch.device) -> str:
    """The precision a run on ``device`` uses for ``requested`` (:data:`~contrastlab.precision.CHOICES`).

    >>> resolve_precision("auto", torch.device("cpu")), resolve_precision("tf32", torch.device("cpu"))
    ('fp32', 'fp32')
    >>> resolve_precision("fp16", torch.device("cpu")), resolve_precision("bf16", torch.device("cpu"))
    ('fp16', 'bf16')
    """
    cuda = device.type == "cuda"
    return resolve(
        requested, cuda=cuda, native_bf16=cuda and torch.cuda.is_bf16_supported(including_emulation=False)
    )


@dataclass(frozen=True)
class Precision:
    """A resolved precision choice: what autocast, the TF32 switches and the loss scaler do."""

    requested: str
    name: str  # resolved: fp32 | tf32 | bf16 | fp16
    device_type: str

    @classmethod
    def resolve(cls, requested: str, device: torch.device) -> Precision:
        return cls(requested, resolve_precision(requested, device), device.type)

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    @property
    def fp32_mode(self) -> str:
        """``tf32`` or ``ieee``: the fp32 matmul/convolution mode of the training step."""
        return "tf32" if self.name == "tf32" else "ieee"

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast for the encoder's forward pass (a no-op in fp32/tf32)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Set both fp32 switches (cuBLAS matmuls, cuDNN convolutions) for one training step, and put
        them back to IEEE fp32 afterwards, so that dev evaluation is always IEEE fp32."""
        set_fp32_mode(self.fp32_mode)
        try:
            yield
        finally:
            set_fp32_mode("ieee")

    def record(self) -> dict[str, Any]:
        """What a run's summary records of its precision (the report's precision table reads it)."""
        return {
            "precision": self.name,
            "requested_precision": self.requested,
            "autocast_dtype": str(self.autocast_dtype).removeprefix("torch.")
            if self.autocast_dtype
            else None,
            "tf32_matmul": self.fp32_mode == "tf32",
            "tf32_conv": self.fp32_mode == "tf32",
            "loss_scaling": self.name == "fp16",
        }


# ----------------------------------------------------------------------------------------------- helpers


def loss_stats_text(loss_fn, h1: torch.Tensor, h2: torch.Tensor) -> str:
    """The loss's stats on ``(h1, h2)`` as JSON, for the non-finite message (never raises: the message
    must get out even if the stats themselves fail)."""
    try:
        return json.dumps(loss_fn(h1.detach(), h2.detach(), with_stats=True).stats, default=float)
    except Exception as err:
        return f"<stats failed: {err}>"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({torch.get_num_threads()} threads)"
    return platform.processor() or platform.machine()


def seed_all(seed: int) -> None:
    """Python's, NumPy's and torch's global generators seeded with ``seed`` (before a model is built)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def epoch_order(n_items: int, seed: int, epoch: int) -> np.ndarray:
    """The order of one epoch's items (a permutation drawn from ``(seed, epoch)``)."""
    return np.random.default_rng([seed, epoch]).permutation(n_items)


def build_optimizer(
    kind: str, params: list[torch.nn.Parameter], device: torch.device, *, fused: bool | None = None, **hp
) -> torch.optim.Optimizer:
    """AdamW, Adam or SGD over ``params``. ``fused=None``: fused kernels on CUDA (one launch updates every
    parameter), PyTorch's default (foreach) implementation elsewhere, which keeps CPU runs bit-equal
    to earlier versions; ``True``/``False`` force either (they agree to float rounding, tested)."""
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {kind!r}")
    if fused is None:
        fused = True if device.type == "cuda" else None
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[kind]
    return cls(params, fused=fused, **hp)


class JsonlLog:
    """Append-only JSON lines file; each of ``mirrors`` also gets every record (TensorBoard, W&B)."""

    def __init__(self, path: Path, mirrors: tuple[Callable[[Mapping[str, Any]], None], ...] = ()) -> None:
        self.path, self.mirrors = path, mirrors

    def write(self, record: Mapping[str, Any]) -> None:
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record, default=float) + "\n")
        for mirror in self.mirrors:
            mirror(record)

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0


class GeneratorState:
    """A ``torch.Generator`` behind ``state_dict``/``load_state_dict``, so it snapshots like a module."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def state_dict(self) -> torch.Tensor:
        return self.generator.get_state()

    def load_state_dict(self, state: torch.Tensor) -> None:
        self.generator.set_state(state.to(self.generator.get_state().device))


# ------------------------------------------------------------------------------------------ TrainingRun


class TrainingRun:
    """One training run's runtime: the protocol builds its model and batches, this does the rest.

    ``state_every`` / ``state_minutes``: a snapshot is due every ``state_every`` steps and/or once
    ``state_minutes`` have passed since the last one (``None`` switches a rule off). ``check_every``:
    how often the device-side non-finite flag is read (a host sync); ``0``: only at the steps that sync
    anyway; ``None``: every step on a CPU (free there), ``0`` on CUDA. The error names the first
    non-finite step. ``events_dir`` (None: no events) and ``hparams``: the TensorBoard folder and the
    settings its HParams session shows; ``wandb_run``: the cell's W&B run (None: none); ``cell``: the
    cell trained (a job's wildcards), recorded by both beside the settings. ``clock`` is for tests.
    """

    def __init__(
        self,
        state_dir: str | Path,
        *,
        device: str | torch.device | None,
        precision: str,
        state_every: int | None,
        state_minutes: float | None = None,
        check_every: int | None = None,
        progress: bool = True,
        events_dir: str | Path | None = None,
        hparams: Mapping[str, Any] | None = None,
        wandb_run: WandbRun | None = None,
        cell: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.started = time.perf_counter()
        self.phases = Phases()  # where the job's time went, from its process's start (training.phases)
        self.state_dir = Path(state_dir)
        self.device = device if isinstance(device, torch.device) else pick_device(device)
        self.precision = Precision.resolve(precision, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.name == "fp16")
        # The step's precision: the encoder's autocast, the fp32 switches around forward + backward +
        # optimiser step, and what to back-propagate (the loss times the fp16 loss scale, else the loss).
        self.autocast, self.step_context = self.precision.autocast, self.precision.step
        self.scale = self.scaler.scale
        self.state_every, self.state_minutes = state_every, state_minutes
        self.check_every = check_every if check_every is not None else (1 if self.device.type == "cpu" else 0)
        self.progress = progress
        self.clock = clock
        self.events = TensorBoardLog(events_dir, hparams, cell)
        self.wandb = WandbLog(wandb_run, hparams, cell)
        self.log = JsonlLog(self.state_dir / st.LOG_FILE, mirrors=(self.events.write, self.wandb.write))
        self.timings: dict[str, float] = {"train_s": 0.0, "state_s": 0.0}
        self.snapshots = SnapshotWriter()  # snapshots written in the background (training.snapshots)
        self._host = HostBuffers()
        self.resumed_from: list[int] = []
        # fp16 steps skipped by the loss scaler: counted on the device (no host sync per step) and read
        # where the run syncs anyway (:attr:`skipped_steps`, :meth:`check_finite`).
        zero = functools.partial(torch.zeros, (), dtype=torch.long, device=self.device)
        self._skipped, self._skip_run, self._worst_skip_run = zero(), zero(), zero()
        self._last_snapshot_t = clock()
        self._bar = None
        self._interval_t, self._paused = time.perf_counter(), 0.0
        self._warm = False
        self._interval(0.0, 0, 0)
        self.phases.mark("cuda_init_s")

    @classmethod
    def for_settings(
        cls, settings: Any, state_dir: str | Path, *, events_dir: str | Path | None = None, **kwargs: Any
    ) -> TrainingRun:
        """The run of a trainer's settings (their ``precision``, ``state_every``, ``state_minutes``, and
        ``tensorboard``: events in ``events_dir``, by default beside the state folder
        (:func:`~contrastlab.training.events.default_events_dir`), or none); the events' HParams are
        the settings' ``to_dict()``. An explicit ``cuda_graph: true`` off CUDA raises one line here."""
        rules = {k: getattr(settings, k) for k in ("precision", "state_every", "state_minutes")}
        events = (events_dir or default_events_dir(state_dir)) if settings.tensorboard else None
        run = cls(state_dir, **rules, events_dir=events, hparams=settings.to_dict(), **kwargs)
        if settings.cuda_graph:  # before anything is loaded: the one-line error comes first
            capture.require_cuda(run.device)
        return run

    # -- description -----------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Device and precision, for the run's start record and summary."""
        return {
            "device": str(self.device),
            "device_name": device_name(self.device),
            **self.precision.record(),
            "events_dir": str(self.events.folder) if self.events.folder else None,
        }

    def count(self, **amounts: float) -> None:
        """Adds ``amounts`` (tokens, sentences, ...) to the summary's ``timings``: what a step ran, from
        which make gpu-check computes its FLOPs."""
        for key, amount in amounts.items():
            self.timings[key] = self.timings.get(key, 0) + amount

    def summary(self) -> dict[str, Any]:
        """The fields every trainer's summary has (timings are final once this is called; the snapshot in
        flight is on disk first). ``state_s`` is what snapshots cost the loop, ``snapshot_write_s`` what
        writing this process's snapshots took in the background."""
        self.wait_for_snapshot()
        self.timings["snapshot_write_s"] = self.snapshots.write_s
        self.timings["total_s"] = time.perf_counter() - self.started
        cuda = self.device.type == "cuda"
        return {
            "timings": self.timings,
            "peak_gpu_memory_gib": torch.cuda.max_memory_allocated(self.device) / 2**30 if cuda else None,
            "resumed_from": self.resumed_from,
            "skipped_steps": self.skipped_steps,
        }

    # -- the step --------------------------------------------------------------------------------------
    def optimizer_step(
        self,
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
        clip_norm: float | None,
        *,
        zero_grad: bool = True,
    ) -> torch.Tensor | None:
        """Unscale (fp16), clip the true gradients' norm to ``clip_norm``, step, update the scale, zero
        the gradients (unless ``zero_grad`` is False: a captured step's backward rewrites them). Returns
        the norm before clipping (a device tensor) or None. An overflowed fp16 step is skipped and counted
        on the device (too many in a row raise at :meth:`check_finite`). No host sync on CUDA."""
        self.scaler.unscale_(optimizer)  # no-op unless fp16: clipping must see the true gradients
        grad_norm = torch.nn.utils.clip_grad_norm_(params, clip_norm) if clip_norm is not None else None
        if self.scaler.is_enabled():
            # The scale falls exactly when the scaler skipped the step. Compared on the device with the
            # scaler's sync-free accessor: get_scale() would sync twice per step.
            before = self.scaler._get_scale_async().clone()
            self.scaler.step(optimizer)
            self.scaler.update()
            skipped = (self.scaler._get_scale_async() < before).long()
            self._skipped += skipped
            self._skip_run.mul_(skipped).add_(skipped)  # (run + 1) if skipped else 0
            torch.maximum(self._worst_skip_run, self._skip_run, out=self._worst_skip_run)
        else:
            optimizer.step()
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def device_state(self) -> Iterator[torch.Tensor]:
        """The device tensors :meth:`optimizer_step` updates in place (the loss scaler's scale and growth
        tracker, the skip counters): what a captured step must put back after its warm-up."""
        yield from (self._skipped, self._skip_run, self._worst_skip_run)
        if self.scaler.is_enabled():
            # the scaler's tensors, created by its first scale() call (private names: no public accessor)
            yield from (t for t in (self.scaler._scale, self.scaler._growth_tracker) if t is not None)

    @property
    def skipped_steps(self) -> int:
        """fp16 steps skipped by the loss scaler over the whole run (a host sync)."""
        return int(self._skipped.item())

    @property
    def skips_in_a_row(self) -> int:
        """fp16 steps skipped in a row up to the last step (a host sync)."""
        return int(self._skip_run.item())

    # -- the loop's bookkeeping ------------------------------------------------------------------------
    def steps(self, start: int, total: int, desc: str) -> Iterator[int]:
        """Steps ``start + 1 .. total`` with a progress bar; the interval clock starts here. The
        TensorBoard events end with the loop (the trainers log no curve after it)."""
        from tqdm.auto import tqdm

        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self._bar = tqdm(
            total=total,
            initial=start,
            unit="step",
            desc=desc,
            disable=not self.progress,
            mininterval=1.0 if sys.stderr.isatty() else 30.0,
            dynamic_ncols=True,
        )
        self._interval_t, self._paused = time.perf_counter(), 0.0
        try:
            for step in range(start + 1, total + 1):
                yield step
                if step == start + 1:  # the first step (a capture, a compilation) timed apart, synchronised
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                    self.phases.loop_started(self.timings)
            self.phases.loop_ended(self.timings)
        finally:
            self._bar.close()
            self.events.close()
            self.wandb.close()

    def _interval(self, loss_sum: float, steps: int, items: int) -> None:
        self._loss_sum = torch.full((), loss_sum, device=self.device)
        self._first_bad = torch.full((), -1, dtype=torch.long, device=self.device)
        self._interval_steps, self._interval_items = steps, items

    def record(self, step: int, loss: torch.Tensor, items: int) -> None:
        """Account one step's (detached) loss and the number of examples it trained on; no host sync."""
        self._loss_sum += loss
        self._first_bad = torch.where((self._first_bad < 0) & ~torch.isfinite(loss), step, self._first_bad)
        self._interval_steps += 1
        self._interval_items += items
        self._bar.update(1)

    def check_finite(
        self, step: int, loss: torch.Tensor, *, syncs: bool, what: str, stats: Callable[[], str]
    ) -> None:
        """Raise :class:`NonFiniteLossError` if a loss since the last check was not finite, or if fp16
        loss scaling skipped :data:`FP16_MAX_CONSECUTIVE_SKIPS` steps in a row since then (at the
        cadence of ``check_every``, or whenever the step ``syncs`` anyway)."""
        if not (syncs or (self.check_every and step % self.check_every == 0)):
            return
        bad, worst = torch.stack([self._first_bad, self._worst_skip_run]).tolist()  # one host sync
        if bad >= 0:
            raise NonFiniteLossError(
                f"{what} is not finite at step {bad} (detected at step {step}, value now {loss.item()}); "
                f"loss stats at step {step}: {stats()}. Try a lower lr, precision=fp32, or check the "
                "hyperparameters."
            )
        if worst >= FP16_MAX_CONSECUTIVE_SKIPS:
            raise NonFiniteLossError(
                f"fp16 loss scaling skipped {worst} steps in a row (scale now {self.scaler.get_scale():g}): "
                "the gradients overflow at every scale; use precision bf16 or fp32"
            )
        self._worst_skip_run.copy_(self._skip_run)

    def take_interval(self, *extra: torch.Tensor) -> dict[str, Any]:
        """The log interval's mean loss, speed and ``extra`` device scalars (one host sync); resets it."""
        now = time.perf_counter()
        elapsed = now - self._interval_t - self._paused
        scaler = [self.scaler._get_scale_async(), self._skipped] if self.scaler.is_enabled() else []
        parts = [self._loss_sum / self._interval_steps, *(x.float() for x in extra), *scaler]
        values = torch.stack([x.float().reshape(()) for x in parts]).tolist()  # the one host sync
        if scaler:
            *values, scale, skipped = values
        self.timings["train_s"] += elapsed
        self.count(timed_items=self._interval_items)
        if self._warm:  # the first interval of a process holds CUDA's and the allocator's warm-up
            self.count(steady_train_s=elapsed, steady_steps=self._interval_steps)
        self._warm = True
        out = {
            "loss": values[0],
            "extra": values[1:],
            "steps_per_s": self._interval_steps / elapsed,
            "items_per_s": self._interval_items / elapsed,
            "items": self._interval_items,
        }
        if scaler:
            out["loss_scale"], out["skipped_steps"] = scale, int(skipped)
        self._loss_sum.zero_()
        self._interval_steps, self._interval_items, self._interval_t, self._paused = 0, 0, now, 0.0
        return out

    def set_postfix(self, **values: str) -> None:
        self._bar.set_postfix(**values, refresh=False)

    def note(self, text: str) -> None:
        """One line on stderr, kept in the run's log (``{"event": "note"}``): what the run decided at set-up
        (after :meth:`begin`; the progress bar's :meth:`write` needs the loop's bar)."""
        print(text, file=sys.stderr, flush=True)
        self.log.write({"event": "note", "text": text})

    def write(self, text: str) -> None:
        """A line on stderr that does not break the progress bar (only with ``progress``)."""
        if self.progress:
            self._bar.write(text, file=sys.stderr)

    @contextlib.contextmanager
    def pause(self, timing: str) -> Iterator[None]:
        """A stretch of non-training work (evaluation, analysis, snapshots): timed into
        ``timings[timing]`` and left out of the training speed."""
        t = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - t
            self.timings[timing] = self.timings.get(timing, 0.0) + elapsed
            self._paused += elapsed

    # -- snapshots -------------------------------------------------------------------------------------
    def runtime_key(self) -> dict[str, str]:
        return {"device_type": self.device.type, "precision": self.precision.name}

    def load_snapshot(self, fingerprint: str) -> dict[str, Any] | None:
        """The snapshot of the same run (same ``fingerprint``), or None. One written under another
        device type or precision stops the run with one line (it cannot be resumed like for like, and
        discarding it would lose the finished steps)."""
        saved = st.load_state(self.state_dir, fingerprint)
        if saved is None:
            return None
        written = saved.get("runtime", self.runtime_key())
        if written != self.runtime_key():
            raise SnapshotMismatchError(
                f"the snapshot in {self.state_dir} was written on {written['device_type']} in "
                f"{written['precision']}, this run is on {self.device.type} in {self.precision.name}; "
                f"resume it on a {written['device_type']} device with precision {written['precision']}, "
                f"or delete {self.state_dir} to start the cell over"
            )
        return saved

    def begin(
        self,
        saved: dict[str, Any] | None,
        stateful: Mapping[str, Any],
        start_record: Mapping[str, Any],
    ) -> int:
        """Start afresh (``saved`` None: clear the state folder, log ``start_record``) or resume: load
        every ``stateful`` object's state (``state_dict``/``load_state_dict``), the scaler, timings,
        the log interval, truncate the log to the snapshot, and restore every RNG last. Returns the
        step to continue after."""
        if saved is None:
            st.reset_state_dir(self.state_dir)
            self.events.start(resume_step=None)
            self.wandb.start(resume_step=None)
            self.log.write({"event": "start", **start_record})
            return 0
        for name, obj in stateful.items():
            obj.load_state_dict(saved[name])
        self.scaler.load_state_dict(saved["scaler"])
        self.timings.update(saved["timings"])
        self.resumed_from = [*saved["resumed_from"], saved["step"]]
        self._skipped.fill_(saved.get("skipped_steps", 0))
        self._interval(*saved["interval"])
        st.truncate_log(self.state_dir, saved["log_offset"])
        self.events.start(resume_step=saved["step"])
        self.wandb.start(resume_step=saved["step"])
        self.log.write({"event": "resume", "step": saved["step"]})
        st.restore_rng(saved["rng"], self.device)
        return saved["step"]

    def snapshot_due(self, step: int, total: int) -> bool:
        if step >= total:
            return False
        by_steps = bool(self.state_every) and step % self.state_every == 0
        by_time = (
            self.state_minutes is not None and self.clock() - self._last_snapshot_t >= 60 * self.state_minutes
        )
        return by_steps or by_time

    def save_snapshot(
        self,
        step: int,
        fingerprint: str,
        stateful: Mapping[str, Any],
        extra: Mapping[str, Any],
        info=None,
        *,
        attached: Mapping[str, Any] | None = None,
        write_attached: Callable[[dict[str, Any]], None] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        """A resumable snapshot after ``step``: the state copied to host memory now, written to disk in the
        background (:mod:`.snapshots`, atomically). ``attached``: more device state copied now (a best
        checkpoint's weights) that ``write_attached(host copy)`` writes first; ``after()`` runs once the
        snapshot is on disk. ``timings["state_s"]`` is the time the loop waited."""
        with self.pause("state_s"):
            self.snapshots.wait()  # its buffers are about to be reused; a failed write raises here
            self.events.flush()  # the curves up to this step on disk before the snapshot is
            payload = {
                "fingerprint": fingerprint,
                "runtime": self.runtime_key(),
                "step": step,
                "resumed_from": self.resumed_from,
                "timings": self.timings,
                "log_offset": self.log.offset(),
                **{name: obj.state_dict() for name, obj in stateful.items()},
                "scaler": self.scaler.state_dict(),
                "skipped_steps": self.skipped_steps,
                "rng": st.capture_rng(self.device),
                # The log's running interval, so that a resumed run logs the same interval means.
                "interval": (self._loss_sum.item(), self._interval_steps, self._interval_items),
                **extra,
            }
            host, ready = self._host.copy({"payload": payload, "attached": dict(attached or {})})
            info = {"step": step, "fingerprint": fingerprint, **self.runtime_key(), **(info or {})}

            def write() -> None:
                if write_attached is not None:
                    write_attached(host["attached"])
                st.save_state(self.state_dir, host["payload"], info)
                if after is not None:
                    after()

            self.snapshots.submit(write, ready)
            note_submitted(self.state_dir, step, self.snapshots.writes)
        self._last_snapshot_t = self.clock()

    def wait_for_snapshot(self) -> None:
        """Block until the snapshot being written is on disk (before the run's last writes, and before a
        caller reads the state folder); a write that failed raises its exception here."""
        with self.pause("state_s"):
            self.snapshots.wait()
