"""Where a training job's time went: the phases its summary and log record."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contrastlab.training import phases as ph

PHASES = ("interpreter_s", "cuda_init_s", "data_s", "model_load_s", "setup_s", "dev_s", "first_step_s")
PHASES += ("snapshots_s", "steps_s", "writes_s")


def test_the_phases_partition_the_time_from_the_process_start(monkeypatch):
    """A job handed over 2 s after its process started, trained 5 s after that: interpreter 2, imports
    3; then the marks; the loop after its first step split by the timings it paused for."""
    now = [1000.0]
    monkeypatch.setattr(ph, "_JOB_START", None)
    monkeypatch.setattr(ph, "_FRAME_PHASES", {})
    ph.note_job_start(
        {"warm": False, "why_cold": "warm starts off", "process_started": 993.0, "handed_over": 995.0}
    )
    phases = ph.Phases(clock=lambda: now[0])
    assert phases.seconds == {"interpreter_s": 2.0, "imports_s": 5.0}
    now[0] += 1.5
    phases.mark("data_s")
    timings = {"eval_s": 4.0, "state_s": 0.0}  # step 0's evaluation, before the loop
    now[0] += 2.0
    phases.loop_started(timings)
    timings.update(eval_s=7.0, analysis_s=0.5, state_s=1.25)  # the loop: 3.5 s of dev, 1.25 of snapshots
    now[0] += 10.0
    phases.loop_ended(timings)
    record = phases.record()
    assert record["start"]["why_cold"] == "warm starts off"
    wanted = {"interpreter_s": 2.0, "imports_s": 5.0, "data_s": 1.5, "first_step_s": 2.0, "dev_s": 3.5}
    wanted |= {"snapshots_s": 1.25, "steps_s": 10.0 - 3.5 - 1.25, "total_s": 1013.5 - 993.0}
    assert record["phases"] == wanted
    # The GPU claim and cuInit, timed by the job's frame inside the imports' span, are phases of their own:
    # the imports lose what they gain, the sum stays the process's time.
    ph.note_phase("gpu_claim_s", 0.5)
    ph.note_phase("cuda_driver_s", 1.25)
    seconds = {"interpreter_s": 2.0, "imports_s": 3.25, "gpu_claim_s": 0.5, "cuda_driver_s": 1.25}
    assert ph.Phases(clock=lambda: 1000.0).seconds == seconds


def test_outside_a_job_the_process_start_comes_from_proc(monkeypatch):
    monkeypatch.setattr(ph, "_JOB_START", None)
    started = ph.process_started()
    assert 0 <= time.time() - started < 24 * 3600  # this test process started before now, today
    phases = ph.Phases()
    assert phases.start is None and set(phases.seconds) == {"interpreter_s"}


def test_a_sentence_cells_summary_and_end_record_carry_its_phases(tmp_path, train_tiny, monkeypatch):
    """A CPU cell's phases: the table's, none negative, partitioning process start to summary."""
    monkeypatch.setattr(ph, "_JOB_START", None)
    summary = train_tiny(tmp_path / "cell")
    phases = _partition(summary, tmp_path / "cell" / "log.jsonl")
    assert list(phases)[: len(PHASES)] == list(PHASES)
    assert phases["dev_s"] >= summary["timings"]["eval_s"] - 0.01  # three evaluations, step 0's included


def _partition(summary: dict, log: Path) -> dict:
    """The summary's phases, after checking that none is negative, they sum to ``total_s`` (its last key)
    and the log's end record carries them."""
    phases = summary["phases"]
    assert list(phases)[-1] == "total_s" and all(seconds >= 0 for seconds in phases.values())
    assert sum(v for k, v in phases.items() if k != "total_s") == pytest.approx(phases["total_s"], abs=0.05)
    end = [json.loads(line) for line in log.read_text().splitlines()][-1]
    assert end["event"] == "end" and end["phases"] == phases and end["start"] is None
    return phases


def test_an_image_cells_phases_partition_its_time_and_count_its_validation_as_dev(
    tmp_path, vision_settings, train_image, monkeypatch
):
    """An image cell's phases partition its time, count validations as ``dev_s``; the end record agrees."""
    monkeypatch.setattr(ph, "_JOB_START", None)
    settings = vision_settings(
        val_fraction=0.2, keep="best_val_loss", batch_size=64, max_steps=None, epochs=2
    )
    summary = train_image(settings, tmp_path)
    phases, timings = _partition(summary, tmp_path / "train_log.jsonl"), summary["timings"]
    assert set(phases) == {*PHASES, "total_s"}  # no step-0 validation
    assert timings["val_s"] > 0 and phases["dev_s"] >= timings["val_s"] - 0.01
    assert summary["steps"] == 2 * summary["steps_per_epoch"] and len(summary["val_losses"]) == 2


# A job as the frame runs it: handed over, its phases begun, 0.3 s of work, the summary written, then 0.4 s
# after it (the export, the weights' record), the summary closed, the process's exit.
JOB = """
import json, sys, time
from contrastlab.training import phases as ph
ph.note_job_start({"warm": False, "why_cold": "test", "process_started": ph.process_started(),
                   "handed_over": time.time()})
phases = ph.Phases()
time.sleep(0.3)
phases.mark("steps_s")
open(sys.argv[1], "w").write(json.dumps(phases.record()))
time.sleep(0.4)
assert ph.close_summary(sys.argv[1])
"""


def test_a_jobs_phases_sum_to_its_wall_within_half_a_second(tmp_path):
    """After close_summary the phases partition the process's wall time, within 0.5 s of the parent's."""
    summary = tmp_path / "train_summary.json"
    began = time.time()
    subprocess.run([sys.executable, "-c", JOB, str(summary)], check=True, timeout=60)
    wall = time.time() - began
    phases = json.loads(summary.read_text())["phases"]
    assert phases["after_s"] == pytest.approx(0.4, abs=0.2)
    assert sum(v for k, v in phases.items() if k != "total_s") == pytest.approx(phases["total_s"], abs=0.05)
    assert abs(wall - phases["total_s"]) <= 0.5, (wall, phases)
    assert not ph.close_summary(tmp_path / "missing.json")
