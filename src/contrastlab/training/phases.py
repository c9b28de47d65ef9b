"""Where a training job's time went, from its process's start: the phases its summary and log record.

The trainers mark the end of each phase (:meth:`Phases.mark`); the summary's ``phases`` partition the
job's wall time into

===============  ==========================================================================================
interpreter_s    the process's start to the job script's hand-over (Python, Snakemake's preamble, the
                 wait for a warm starter); outside Snakemake, everything before the trainer was called
imports_s        the hand-over to the trainer's call (the script's imports: none left in a warm fork),
                 less the job frame's own phases below
gpu_claim_s      the job's GPU slot claimed (and its MPS daemon joined): a wait for another job's GPU
cuda_driver_s    ``torch.cuda.is_available()``: the CUDA driver's initialisation (``cuInit``)
nvidia_smi_s     ``nvidia-smi`` asked why torch cannot use the GPU (only where it cannot)
cuda_init_s      the run's device and its first tensors (the CUDA context on a GPU)
data_s           the backbone's config, tokenizer and the tokenised corpus (or the images)
model_load_s     the model, head, optimiser and loss built on the device
setup_s          the dev set on the device, the snapshot read, the log begun
first_step_s     the first step, the CUDA graph's capture or the compilation included (synchronised)
steps_s          every other step
dev_s            dev evaluations (step 0's included), the geometry probe, the vision validation
snapshots_s      what snapshots cost the loop (their host copies; the writes run in the background)
writes_s         the best checkpoint and the exported folder
after_s          what the job did after its summary: the finished state, the export, the log copy, the
                 weights' record (:func:`close_summary`)
===============  ==========================================================================================

and ``total_s`` from the process's start to the summary, then (:func:`close_summary`) to the job's last
write. ``start`` says how the job began, warm (a fork of a starter with torch imported) or cold, and
why (:func:`note_job_start`; ``None`` outside a Snakemake job).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from contrastlab.paths import write_text

__all__ = ["Phases", "close_summary", "note_job_start", "note_phase", "process_started"]

#: How the running job started (:func:`note_job_start`), set by the workflow's job frame.
_JOB_START: dict[str, Any] | None = None
#: Phases the job's frame timed before its trainer's :class:`Phases` began (:func:`note_phase`).
_FRAME_PHASES: dict[str, float] = {}
#: The timings (TrainingRun.timings) that the step loop pauses for, by the phase they belong to.
LOOP_PAUSES = {"dev_s": ("eval_s", "analysis_s", "val_s"), "snapshots_s": ("state_s",)}


def note_job_start(record: Mapping[str, Any] | None) -> None:
    """Keep how this job's process started (:func:`contrastlab.workflow.job_start.start_record`): its start
    time, when it was handed over, warm or cold and why; the next :class:`Phases` reads it."""
    global _JOB_START
    _JOB_START = dict(record) if record else None
    _FRAME_PHASES.clear()  # a new job: its frame's phases are noted after this


def note_phase(phase: str, seconds: float) -> None:
    """``seconds`` more of ``phase`` (``gpu_claim_s``, ``cuda_driver_s``, ``nvidia_smi_s``), timed by the
    job's frame before the trainer began: the next :class:`Phases` shows it apart from ``imports_s``."""
    _FRAME_PHASES[phase] = _FRAME_PHASES.get(phase, 0.0) + seconds


def close_summary(path: str | os.PathLike, clock: Callable[[], float] = time.time) -> bool:
    """Extend the phases of the summary at ``path`` (a trainer's ``train_summary.json`` or an image
    encoder's ``settings.json``) to now: ``after_s`` holds what the job did since the summary was
    written, ``total_s`` runs to this moment; so a job's phases cover its wall time up to its exit.
    Called last by the job's frame; False (nothing written) where the summary has no phases or no
    start (not a Snakemake job) or cannot be read."""
    path = Path(path)
    try:
        summary = json.loads(path.read_text())
        phases, start = summary["phases"], summary["start"]
        total = clock() - start["process_started"]
        phases["after_s"] = phases.get("after_s", 0.0) + max(0.0, total - phases["total_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    phases["total_s"] = max(total, phases["total_s"])
    write_text(path, json.dumps(summary, indent=1, default=float) + "\n")
    return True


def process_started() -> float:
    """The epoch time this process started: ``/proc/self/stat``'s start time after boot (clock ticks,
    10 ms) and ``/proc/uptime`` (rather than ``/proc/stat``'s boot time, whole seconds); the import time of
    this module where ``/proc`` cannot tell. The workflow's start record
    (:mod:`contrastlab.workflow.job_start`) reads it too."""
    try:
        # the fields after the command, which is in parentheses and may hold spaces; starttime: field 22
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        since_boot = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - since_boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return _IMPORTED


_IMPORTED = time.time()


class Phases:
    """The phases of one training process, in seconds (see the module's table). ``clock`` is for
    tests (epoch seconds)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.start = _JOB_START
        now = clock()
        self.started = self.start["process_started"] if self.start else process_started()
        self.seconds: dict[str, float] = {}
        handed_over = self.start.get("handed_over") if self.start else None
        if handed_over is None:
            self.seconds["interpreter_s"] = max(0.0, now - self.started)
        else:
            self.seconds["interpreter_s"] = max(0.0, handed_over - self.started)
            # the frame's own phases (GPU claim, cuInit) lie inside the imports' span: shown apart from it
            self.seconds["imports_s"] = max(0.0, now - handed_over - sum(_FRAME_PHASES.values()))
            self.seconds.update(_FRAME_PHASES)
        self._last = now
        self._loop_paused: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """The phase ``phase`` ends now: the time since the previous mark is added to it."""
        now = self.clock()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + max(0.0, now - self._last)
        self._last = now

    def loop_started(self, timings: Mapping[str, float]) -> None:
        """The first step is done (marked ``first_step_s``): the pauses counted from here are the loop's."""
        self.mark("first_step_s")
        self._loop_paused = {key: timings.get(key, 0.0) for keys in LOOP_PAUSES.values() for key in keys}

    def loop_ended(self, timings: Mapping[str, float]) -> None:
        """The step loop after its first step, split into dev evaluations, snapshots and steps."""
        now = self.clock()
        loop = max(0.0, now - self._last)
        for phase, keys in LOOP_PAUSES.items():
            paused = sum(timings.get(key, 0.0) - self._loop_paused.get(key, 0.0) for key in keys)
            self.seconds[phase] = self.seconds.get(phase, 0.0) + paused
            loop -= paused
        self.seconds["steps_s"] = self.seconds.get("steps_s", 0.0) + max(0.0, loop)
        self._last = now

    def record(self) -> dict[str, Any]:
        """``{"start": ..., "phases": {phase: seconds, ..., "total_s": ...}}`` as of now."""
        return {"start": self.start, "phases": {**self.seconds, "total_s": self.clock() - self.started}}
