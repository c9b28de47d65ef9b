"""The one training loop of both trainers: steps, the log's intervals, evaluations, snapshots, the end.

Each trainer describes its run as a :class:`Track`, which this module runs on a
:class:`~contrastlab.training.runtime.TrainingRun` at the shared cadences: a step's batch is the rows
``position * batch_size`` onwards of its epoch's seeded permutation; a log line every ``log_every``
steps and at the last; each evaluation every ``every`` steps of its own and at the last (``at_start``
ones also at step 0 of a fresh run); a snapshot when the run says one is due; the non-finite check at
every step that reads the device anyway, or at ``check_every``. The order of the work in a step is the
one both trainers always had, so their numbers, logs and snapshots are unchanged by sharing it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from contrastlab.paths import atomic_write
from contrastlab.provenance import run_metadata
from contrastlab.training import state as st
from contrastlab.training.runtime import TrainingRun, loss_stats_text
from contrastlab.training.settings import fingerprint_settings

__all__ = [
    "Evaluation",
    "StepOutput",
    "Track",
    "begin",
    "copy_log",
    "due",
    "fingerprint",
    "summarise",
    "train_steps",
]


@dataclass(frozen=True)
class StepOutput:
    """One step's results: the loss output, the two views' embeddings, the detached total loss the log
    averages (with OAR's term, where there is one), the gradient norm (None where the step did not
    measure it), the number of examples trained on and the track's ``extra`` (OAR's term)."""

    out: Any
    h1: torch.Tensor
    h2: torch.Tensor
    loss: torch.Tensor
    grad_norm: torch.Tensor | None
    items: int
    extra: Any = None


@dataclass(frozen=True)
class Evaluation:
    """An evaluation every ``every`` steps and at the last step: ``call(step, epoch)``; with
    ``at_start`` also at step 0 of a fresh run (the backbone before training)."""

    every: int
    call: Callable[[int, int], Any]
    at_start: bool = False


class Track:
    """What one trainer brings to the loop (the sentence and the image track implement it).

    Attributes: ``s`` the run's settings (``loss``, ``loss_hp``, ``batch_size``, ``log_every``,
    ``to_dict``); ``loss_fn`` its loss (the non-finite message's stats); ``fingerprint`` the snapshot's
    identity; ``stateful`` what a snapshot saves and a resume loads, by name; ``total`` and
    ``steps_per_epoch``; ``evaluations`` in the order they run; ``desc`` the progress bar's label;
    ``items`` the examples the log's speed counts (``sentences``, ``images``)."""

    s: Any
    loss_fn: Any
    fingerprint: str
    stateful: Mapping[str, Any]
    total: int
    steps_per_epoch: int
    evaluations: Sequence[Evaluation] = ()
    desc: str = ""
    items: str = "items"

    def prepare(self, start: int) -> None:
        """Before the first step, after any resume's loading (a CUDA graph is captured here)."""

    def epoch(self, epoch: int) -> Any:
        """The order of ``epoch``'s rows (an array the loop slices into batches)."""
        raise NotImplementedError

    def lr(self, logging: bool) -> float:
        """The rate the step about to run trains with (a float at log steps)."""
        raise NotImplementedError

    def step(self, step: int, rows: Any, logging: bool) -> StepOutput:
        """Train on the batch of ``rows``; ``logging``: a log line follows (the loss's stats wanted)."""
        raise NotImplementedError

    def stats(self, result: StepOutput) -> dict[str, Any]:
        """The log line's ``stats`` for the step's ``result``."""
        raise NotImplementedError

    def logged(self, record: Mapping[str, Any]) -> None:
        """After a log line: what the progress bar shows of it."""

    def snapshot(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`TrainingRun.save_snapshot` beyond the training state (the
        selection's state as ``extra``, ``info``, a best checkpoint ``attached``)."""
        return {"extra": {}}

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Take up a snapshot's selection on resume."""


def due(step: int, every: int, total: int) -> bool:
    """Whether a thing done every ``every`` steps and at the last one is done at ``step``.

    >>> [step for step in range(1, 11) if due(step, 4, 10)]
    [4, 8, 10]
    """
    return step % every == 0 or step == total


def fingerprint(settings: Any, later_defaults: Mapping[str, Any], *identity: Any) -> str:
    """A snapshot's identity: the settings that change the numbers (those newer than the snapshot format
    left out at their ``later_defaults``) and what else defines the run (``identity``: the backbone, the
    corpus or the images)."""
    key = [fingerprint_settings(settings.to_dict(), later_defaults), *identity]
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def begin(
    run: TrainingRun, track: Track, saved: Mapping[str, Any] | None, run_info: Mapping[str, Any], notes
) -> int:
    """Start afresh (the start record: settings, ``run_info``, metadata; the ``at_start`` evaluations at
    step 0) or resume ``saved`` (the training state, then the track's selection); the ``notes`` of the
    run's set-up logged either way. Returns the step to continue after."""
    start_record = {"settings": track.s.to_dict(), **run_info, "meta": run_metadata()}
    start = run.begin(saved, track.stateful, start_record)
    for note in notes:
        run.note(note)
    run.phases.mark("setup_s")
    at_start = [evaluation for evaluation in track.evaluations if evaluation.at_start]
    if saved is not None:
        track.restore(saved)
    elif at_start:
        for evaluation in at_start:
            evaluation.call(0, 0)  # the backbone before training
        run.phases.mark("dev_s")
    return start


def train_steps(run: TrainingRun, track: Track, start: int) -> None:
    """Steps ``start + 1`` to ``track.total``: each on its batch, then at their cadences the log line,
    the evaluations and the snapshot (module docstring)."""
    track.prepare(start)
    s, total = track.s, track.total
    what = f"loss {s.loss!r} (hp {json.dumps(dict(s.loss_hp))})"
    order_epoch, order = -1, None
    try:
        for step in run.steps(start, total, desc=track.desc):
            epoch, position = divmod(step - 1, track.steps_per_epoch)
            if epoch != order_epoch:
                order_epoch, order = epoch, track.epoch(epoch)
            rows = order[position * s.batch_size : (position + 1) * s.batch_size]
            logging = due(step, s.log_every, total)
            evaluations = [e for e in track.evaluations if due(step, e.every, total)]
            snapshot = run.snapshot_due(step, total)
            lr = track.lr(logging)
            result = track.step(step, rows, logging)
            run.record(step, result.loss, result.items)
            stats = functools.partial(loss_stats_text, track.loss_fn, result.h1, result.h2)
            run.check_finite(
                step, result.loss, syncs=logging or bool(evaluations) or snapshot, what=what, stats=stats
            )
            if logging:
                track.logged(_log_interval(run, track, step, epoch, lr, result))
            for evaluation in evaluations:
                evaluation.call(step, epoch)
            if snapshot:
                run.save_snapshot(step, track.fingerprint, track.stateful, **track.snapshot())
    except BaseException:
        # The snapshot this run started is written before the error leaves, as the interpreter's exit would
        # let it finish: a warm-started job ends by os._exit, which does not wait for the writer thread.
        # The write's own failure, if any, gives way to the error that stopped the run.
        with contextlib.suppress(Exception):
            run.wait_for_snapshot()
        raise


def _log_interval(run: TrainingRun, track: Track, step: int, epoch: int, lr: float, result: StepOutput):
    """The JSONL training line of the interval that ends at ``step`` (the loop's routine host sync)."""
    interval = run.take_interval(result.grad_norm, result.loss)
    record = {
        "event": "train",
        "step": step,
        "epoch": epoch,
        "loss": interval["loss"],
        "loss_last": interval["extra"][1],
        "lr": lr,
        "grad_norm": interval["extra"][0],
        "stats": track.stats(result),
        "steps_per_s": interval["steps_per_s"],
        f"{track.items}_per_s": interval["items_per_s"],
    }
    if "loss_scale" in interval:
        record.update(loss_scale=interval["loss_scale"], skipped_steps=interval["skipped_steps"])
    run.log.write(record)
    return record


def summarise(
    run: TrainingRun,
    track: Track,
    fields: Mapping[str, Any],
    run_info: Mapping[str, Any],
    timings: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    end_keys: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The run's summary (the track's ``fields`` first, then the run's, ``run_info``, the settings and
    metadata; ``timings(run's timings)`` added to its timings) and the log's end record (``end_keys``
    and the fields every run's end has). Call it once the run's own last writes are done: its phases end
    here."""
    summary = {**fields, **run.summary(), **run_info, "settings": track.s.to_dict(), "meta": run_metadata()}
    summary["timings"].update(timings(summary["timings"]))
    run.phases.mark("writes_s")  # the last snapshot's write and the kept weights
    summary.update(run.phases.record())
    keys = (*end_keys, "steps", "timings", "device_name", "peak_gpu_memory_gib", "start", "phases")
    run.log.write({"event": "end", **{k: summary[k] for k in keys}})
    return summary


def finish(run: TrainingRun, track: Track, summary: Mapping[str, Any], export, keep_state: bool) -> None:
    """The run's end once its summary is written: a "finished" snapshot (a kill during the export, or
    outputs removed after the job, only redo the export), then :func:`export_outputs`."""
    finished = {"fingerprint": track.fingerprint, "runtime": run.runtime_key(), "finished": True}
    st.save_state(run.state_dir, {**finished, "summary": summary}, {"finished": True})
    export_outputs(run, export, keep_state)


def export_outputs(run: TrainingRun, export: Callable[[], None], keep_state: bool) -> None:
    """``export()`` (the outputs copied out of the state folder), then the state folder removed unless
    ``keep_state`` (a workflow job keeps it until Snakemake has accepted the outputs)."""
    export()
    if not keep_state:
        shutil.rmtree(run.state_dir, ignore_errors=True)


def copy_log(state_dir: Path, log_path: Path) -> None:
    """The run's log (``state_dir``'s) copied to ``log_path``, atomically."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(log_path) as tmp_log:
        shutil.copyfile(state_dir / st.LOG_FILE, tmp_log)
