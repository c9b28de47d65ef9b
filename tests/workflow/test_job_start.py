"""How a job started (contrastlab.workflow.job_start): the record a job reads of itself, its process's
start read from the kernel, and the line each job frame writes into its log."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from contrastlab.training.phases import process_started
from contrastlab.workflow import job, job_start
from contrastlab.workflow.job_start import STATE_VARIABLE, start_line, start_record, start_state

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux-only")

REFUSED = "starter refused: CUDA driver loaded by imports"


def test_a_process_start_is_read_from_the_kernel():
    """A new interpreter's start: after the moment it was started, before its own first statement."""
    code = "import time; now = time.time()\nfrom contrastlab.training.phases import process_started\n"
    code += "print(process_started(), now)"
    before = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    started, first_statement = map(float, out.split())
    assert before - 0.05 <= started <= first_statement, (before, started, first_statement)


def test_a_job_reads_the_record_handed_to_its_process(monkeypatch):
    """The record hand_over leaves for this process: its fields and their types, as JSON gives them."""
    monkeypatch.setenv(
        STATE_VARIABLE, start_state(warm=False, why_cold=REFUSED, waited_s=0.0, pid=os.getpid())
    )
    record = start_record()
    assert set(record) == {"warm", "why_cold", "process_started", "handed_over", "waited_s"}
    assert record["warm"] is False and record["why_cold"] == REFUSED and record["waited_s"] == 0.0
    assert record["process_started"] == pytest.approx(process_started(), abs=0.05)
    assert record["process_started"] <= record["handed_over"] <= time.time()
    json.dumps(record)  # plain JSON: a trainer may write it into its summary as it is


def test_the_start_line_of_a_cold_job_says_why_and_how_long_after_the_process_began():
    """(The warm line: tests/workflow/test_warm_record.py.)"""
    now = time.time()
    cold = {"warm": False, "why_cold": REFUSED, "process_started": now - 9.0, "handed_over": now - 8.9}
    line = start_line({**cold, "waited_s": 0.0})
    assert re.fullmatch(rf"job start: cold \({REFUSED}\), 9\.\d s after the process began", line), line
    # never a failure line: the workflow takes a log's last "contrastlab: " line for the job's error
    assert not line.startswith("contrastlab: ")


@pytest.mark.parametrize("frame", ["training_job", "evaluation_job"])
def test_each_job_frame_writes_how_the_job_started_into_its_log(frame, tmp_path, monkeypatch):
    import torch

    for name, stand_in in {
        "job_device": lambda snakemake: "cpu",
        "job_inputs": lambda snakemake: {},
        "note_inputs": lambda inputs: None,
        "record_job": lambda snakemake: None,
        "job_data_locations": lambda snakemake: {},
        "stderr_to_log": lambda path: None,  # file descriptor 2 is pytest's
    }.items():
        monkeypatch.setattr(job, name, stand_in)
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # this process's threads stay
    monkeypatch.setenv(
        STATE_VARIABLE, start_state(warm=False, why_cold=REFUSED, waited_s=0.0, pid=os.getpid())
    )
    log = tmp_path / "logs" / "job.log"
    snakemake = SimpleNamespace(log=[str(log)], rule="train", wildcards={}, threads=1, config={}, output=[])
    with getattr(job, frame)(snakemake):
        print("the job's own output")
    lines = log.read_text().splitlines()
    assert lines[0].startswith(f"job start: cold ({REFUSED}), ") and lines[1] == "the job's own output", lines


def test_a_refusal_records_whether_the_loaded_driver_was_initialised(tmp_path, monkeypatch):
    """CUDA forbids a fork after cuInit, not after loading libcuda: cuDeviceGetCount's answer (3,
    CUDA_ERROR_NOT_INITIALIZED, before cuInit) goes into the refusal's record for a GPU run to read."""
    for code, said in {3: "no", 0: "yes", 100: "unknown (CUresult 100)"}.items():
        driver = SimpleNamespace(cuDeviceGetCount=lambda count, code=code: code)
        monkeypatch.setattr(ctypes, "CDLL", lambda name, driver=driver: driver)
        assert job_start.driver_initialised() == said
    monkeypatch.setattr(ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError("no libcuda.so.1")))
    assert job_start.driver_initialised() == "unknown (OSError)"
    address = tmp_path / "key.sock"
    job_start.record_refusal(address, "CUDA driver loaded by imports", driver_initialised="no")
    assert json.loads((tmp_path / "key.refused").read_text())["driver_initialised"] == "no"
    assert job_start.refusal(address) == "starter refused: CUDA driver loaded by imports"
