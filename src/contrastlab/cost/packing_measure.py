"""Measuring what several small cells on one GPU gain (:mod:`contrastlab.cost.packing` prices it): 1, 2
and 4 copies of a training step, each in a process of its own and in the trainer's mode, timed together,
without and with a private MPS daemon (:func:`pooled_rows`; ``make gpu-check``, ``benchmarks/gpu_share.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import multiprocessing as mp
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
import transformers

from contrastlab import families
from contrastlab.losses import build_loss
from contrastlab.training import capture, vision_capture
from contrastlab.training.equivalence import training_step
from contrastlab.training.runtime import TrainingRun, build_optimizer, resolve_precision
from contrastlab.training.sentence import TrainSettings, build_head
from contrastlab.training.vision import VisionTrainSettings, build_parts, train_step, two_views

#: What the step copies import (the toy's tiny BERT's modelling included): the modules a fork server
#: imports once for all copies (``forkserver_preload`` of :func:`pooled_rows`).
STEP_COPY_MODULES = (
    "torch",
    "transformers",
    "transformers.models.bert.modeling_bert",
    "contrastlab.cost.packing",
    "contrastlab.losses",
    "contrastlab.models.vision",
    "contrastlab.training.equivalence",
    "contrastlab.training.runtime",
    "contrastlab.training.sentence",
    "contrastlab.training.vision",
    "contrastlab.training.vision_capture",
)
#: The control program of NVIDIA's Multi-Process Service (:func:`mps_daemon`).
MPS_CONTROL = "nvidia-cuda-mps-control"


def _packing_row(k: int, copies: Sequence[Mapping[str, Any]], alone: float | None) -> dict[str, Any]:
    """One row of :func:`pooled_rows`: ``k`` copies' rates, their sum, the speed-up over one copy's
    ``alone`` (None: this is the one), the largest peak and the step mode the copies ran."""
    rates = [float(c["steps_per_s"]) for c in copies]
    peaks = [c["peak_gib"] for c in copies if c.get("peak_gib") is not None]
    total = sum(rates)
    row = {
        "k": k,
        "steps_per_s": rates,
        "sum": total,
        "speedup": total / alone if alone else 1.0,
        "peak_gib": max(peaks, default=None),
    }
    return row | {key: copies[0][key] for key in ("mode", "precision") if key in copies[0]}


def pooled_rows(
    series: Mapping[str, Callable[[], StepCopy]],
    counts: Sequence[int],
    *,
    steps: int,
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
    forkserver_preload: Sequence[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """For each step of ``series`` (name -> a picklable factory that builds and warms up one copy) and
    each k of ``counts`` (the first 1): :func:`_packing_row` of k copies timed at once. max(``counts``)
    workers start once; for each k the first k time ``steps`` steps together while the others wait at a
    barrier (an idle process does not share the GPU). ``env``: set in each worker before CUDA starts (an
    MPS daemon's pipe); ``forkserver_preload``: the workers fork from a server that imported these
    modules once (else each is spawned). Raises ``RuntimeError`` (one line) when a worker fails or is
    silent for ``timeout`` seconds."""
    if not counts or counts[0] != 1:
        raise ValueError(f"counts must start with 1 (one copy alone: the speed-ups' base), got {counts!r}")
    ctx = mp.get_context("spawn" if forkserver_preload is None else "forkserver")
    if forkserver_preload is not None:
        ctx.set_forkserver_preload(["__main__", *forkserver_preload])
    workers = max(counts)
    results, barrier = ctx.Queue(), ctx.Barrier(workers, timeout=timeout)
    args = (dict(series), tuple(counts), steps, dict(env or {}), barrier, results)
    procs = [ctx.Process(target=_pool_worker, args=(i, *args)) for i in range(workers)]
    for p in procs:
        p.start()
    try:
        found = _collect(results, procs, len(series) * sum(counts), timeout)
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    out = {}
    for name in series:
        rows: list[dict[str, Any]] = []
        for k in counts:
            copies = [found[name, k, i] for i in range(k)]
            rows.append(_packing_row(k, copies, rows[0]["sum"] if rows else None))
        out[name] = rows
    return out


def _collect(results, procs, expected: int, timeout: float) -> dict[tuple[str, int, int], dict]:
    """The pool's ``expected`` rows by (step, count, worker); one line on a failed or silent worker."""
    found: dict[tuple[str, int, int], dict] = {}
    quiet_since = time.monotonic()
    while len(found) < expected:
        try:
            name, k, index, row = results.get(timeout=1.0)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() - quiet_since > timeout:
                why = f"exit codes {dead}" if dead else f"no result within {timeout:.0f} s"
                raise RuntimeError(f"packing: a worker of {len(procs)} failed ({why})") from None
            continue
        if name is None:
            raise RuntimeError(f"packing: worker {index} failed: {row}")
        found[name, k, index], quiet_since = row, time.monotonic()
    return found


def _pool_worker(index: int, series, counts, steps: int, env, barrier, results) -> None:
    """One worker of :func:`pooled_rows`: every step built in turn, timed in the counts it takes part in."""
    os.environ.update(env)  # before CUDA starts in this process: the MPS client reads it then
    try:
        for name, build in series.items():
            copy = build()
            for k in counts:
                barrier.wait()  # all built, or the previous count's copies done
                if index < k:
                    results.put((name, k, index, copy.time(steps)))
            barrier.wait()
            copy.release()
    except threading.BrokenBarrierError:
        sys.exit(1)  # another worker failed and said why
    except Exception as err:
        barrier.abort()  # the others stop waiting; this one's cause goes to the parent
        results.put((None, 0, index, " ".join(f"{type(err).__name__}: {err}".split())[:300]))
        raise


@contextlib.contextmanager
def mps_daemon(timeout: float = 30) -> Iterator[dict[str, str] | None]:
    """A private NVIDIA MPS control daemon for the block (its own pipe and log folder, apart from the
    machine's): yields its clients' environment, or None where :data:`MPS_CONTROL` is missing or does not
    start; stopped and removed afterwards."""
    control = shutil.which(MPS_CONTROL)
    if control is None:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="contrastlab-mps-")
    env = {"CUDA_MPS_PIPE_DIRECTORY": folder, "CUDA_MPS_LOG_DIRECTORY": folder}
    run = functools.partial(subprocess.run, env={**os.environ, **env}, capture_output=True, timeout=timeout)
    try:
        started = run([control, "-d"]).returncode == 0
    except (OSError, subprocess.SubprocessError):
        started = False
    try:
        yield env if started else None
    finally:
        if started:
            run([control], input=b"quit\n")
        shutil.rmtree(folder, ignore_errors=True)


class StepCopy:
    """One copy's training step, built in this process and warmed up by ``warmup`` untimed steps
    (optimiser state, kernel choice, allocator): :meth:`time` runs ``steps`` more and returns their rate,
    the peak GPU memory (CUDA), the step ``mode`` and the resolved ``precision``."""

    def __init__(self, step, device, precision: str, warmup: int, *, graph: bool, padding_free: bool = False):
        for _ in range(warmup):
            step()
        mode = families.StepMode(graph=graph, compile=False, padding_free=padding_free, dev_batch=None)
        self.step, self.device, self.mode, self.precision = step, device, mode.name, precision

    def time(self, steps: int) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        if cuda:
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated(self.device) / 2**30 if cuda else None
        return {
            "steps_per_s": steps / elapsed,
            "peak_gib": peak,
            "mode": self.mode,
            "precision": self.precision,
        }

    def release(self) -> None:
        """Free the copy's model, optimiser and graph before the next step is built."""
        self.step = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def trainer_settings(settings: Mapping[str, Any] | None, resolved: str, device, model_type: str):
    """The sentence trainer's ``TrainSettings`` for a cell's ``settings`` (None: the defaults) on
    ``device`` at the ``resolved`` precision with a ``model_type`` backbone, as the trainer decides them
    there (:func:`contrastlab.training.capture.for_device`): the graph, padding-free or neither."""
    configured = TrainSettings.from_dict({"loss": "infonce", **(settings or {})})
    return capture.for_device(configured, device, precision=resolved, model_type=model_type)[0]


def sentence_step(
    *,
    model_config: Mapping[str, Any],
    batch: int,
    length: int,
    precision: str,
    device: str,
    warmup: int,
    state_dir: str,
    settings: Mapping[str, Any] | None = None,
    config_class: str = "BertConfig",
    threads: int = 1,
) -> StepCopy:
    """A :class:`StepCopy` of the sentence trainer's step in its mode for ``settings``
    (:func:`trainer_settings`) on a random ``config_class(**model_config)`` encoder at ``batch`` sentences
    × ``length`` tokens."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    where = torch.device(device)
    config = getattr(transformers, config_class)(**model_config)
    model = transformers.AutoModel.from_config(config).to(where).train()
    head = build_head("simcse", config.model_type, config.hidden_size)[0].to(where).train()
    params = [*model.parameters(), *head.parameters()]
    resolved = resolve_precision(precision, where)
    s = trainer_settings({**(settings or {}), "precision": precision}, resolved, where, config.model_type)
    run = TrainingRun(state_dir, device=where, precision=resolved, state_every=None, progress=False)
    optimizer = build_optimizer("adamw", params, where, lr=1e-5, capturable=bool(s.cuda_graph))
    ids = torch.randint(1000, config.vocab_size, (batch, length), device=where)
    # Padded rows as the trainer's batches have them (one at the full length, the rest shorter): an
    # all-ones mask would let SDPA drop the mask and time another kernel (docs/gpu-defects.md, G5).
    lengths = torch.randint(min(8, length), length + 1, (batch,), device=where)
    lengths[0] = length
    chunk = (ids, (torch.arange(length, device=where) < lengths[:, None]).to(ids.dtype))
    parts = (run, model, head, build_loss("infonce"), optimizer, params)
    mode = {"graph": bool(s.cuda_graph), "padding_free": bool(s.padding_free)}
    step = training_step(*parts, chunk, **mode)
    return StepCopy(lambda: step(*chunk), where, resolved, warmup, **mode)


def vision_step(
    *, settings: Mapping[str, Any], device: str, warmup: int, state_dir: str, n_images: int, threads: int = 1
) -> StepCopy:
    """A :class:`StepCopy` of the image trainer's step for a cell's ``settings`` as the trainer runs it on
    ``device`` (:func:`trainer_image_graph`), on random images; without
    OAR's labelled pass (its batches need the dataset; the copy times the contrastive step)."""
    s = dataclasses.replace(VisionTrainSettings.from_dict(settings), oar_fraction=0.0)
    where = torch.device(device)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    run = TrainingRun(state_dir, device=where, precision=s.precision, state_every=None, progress=False)
    graph = trainer_image_graph(settings, where, n_images)
    size = s.input_size or s.image_size
    built = build_parts(s, run, None, size)  # the trainer's own: seeded modules, optimiser, loss, cuDNN
    images = torch.randint(0, 256, (s.batch_size, 3, size, size), dtype=torch.uint8, device=where)
    options = {"memory_format": built.memory_format, "head_autocast": s.head_autocast}
    if graph:
        captured = vision_capture.capture_vision_step(
            run, train_step, built.step, built.augment, built.views, images, calls=s.augment_calls, **options
        )
        return StepCopy(lambda: captured(images), where, run.precision.name, warmup, graph=True)

    eager = {**options, "autocast": run.autocast, "with_stats": False, "scale": run.scale}

    def step() -> None:  # as the trainer runs it eager, without OAR's pass
        with run.step_context():
            pair = two_views(built.augment, images, built.views, s.augment_calls)
            train_step(built.forward_encoder, built.head, built.loss_fn, *pair, **eager)
            run.optimizer_step(built.optimizer, built.params, clip_norm=None)

    return StepCopy(step, where, run.precision.name, warmup, graph=False)


def trainer_image_graph(settings: Mapping[str, Any], device, n_images: int) -> bool:
    """Whether the image trainer captures the step of a cell's ``settings`` on ``device`` over
    ``n_images`` training images (:func:`contrastlab.training.capture.for_device`)."""
    decided, _ = capture.for_device(VisionTrainSettings.from_dict(settings), device, n_images=n_images)
    return decided.cuda_graph
