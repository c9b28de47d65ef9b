"""The MPS daemon of the jobs that share a GPU (contrastlab.workflow.mps): the first job starts it, the
last stops it, a killed job's daemon is started afresh, each has its own folders, and the clients number
the GPUs as the daemon does. Against a stand-in nvidia-cuda-mps-control (tests/mps_standin.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contrastlab.workflow import mps
from tests import mps_standin

#: A job: joins the MPS daemon of its GPUs, says what it was given, holds it until a line on stdin.
JOB = """
import os, sys
from contrastlab.workflow import mps
mps.join([d for d in sys.argv[1].split(",") if d], sys.argv[2])
print(os.environ["CUDA_MPS_PIPE_DIRECTORY"], os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """The stand-in first on PATH (this process's and its children's); its log."""
    bin_dir, log = mps_standin.install(tmp_path / "standin")
    monkeypatch.setenv("PATH", mps_standin.path_with(bin_dir))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return log


def _job(devices: str, base: Path, **env: str) -> subprocess.Popen:
    command = [sys.executable, "-c", JOB, devices, str(base)]
    env = {**os.environ, **env}
    job = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    job.said = job.stdout.readline().split()  # the job joined (or failed: nothing said)
    return job


def _end(job: subprocess.Popen) -> None:
    job.stdin.write("\n")
    job.stdin.flush()
    assert job.wait(timeout=30) == 0


def test_the_first_job_starts_the_daemon_and_the_last_stops_it(standin, tmp_path):
    base = tmp_path / "locks"
    jobs = [_job("3", base) for _ in range(3)]
    folder = mps.daemon_folder(["3"], base)
    try:
        assert [j.said for j in jobs] == [[str(folder / "pipe"), "0"]] * 3  # GPU 3 is the daemon's 0
        assert [c["what"] for c in mps_standin.calls(standin)] == ["start"]
        _end(jobs[0])
        _end(jobs[1])
        assert [c["what"] for c in mps_standin.calls(standin)] == ["start"]  # one job still uses it
    finally:
        _end(jobs[2])
    calls = mps_standin.calls(standin)
    assert [c["what"] for c in calls] == ["start", "quit"]
    assert {(c["pipe"], c["devices"]) for c in calls} == {(str(folder / "pipe"), "3")}  # the daemon's GPU
    assert not (folder / "started").exists()


def test_a_killed_jobs_daemon_is_stopped_by_the_last_job_or_restarted_by_the_next(standin, tmp_path):
    base = tmp_path / "locks"
    first, second = _job("0", base), _job("0", base)
    os.kill(first.pid, signal.SIGKILL)  # its lock goes with it; the other job still uses the daemon
    first.wait()
    _end(second)
    assert [c["what"] for c in mps_standin.calls(standin)] == ["start", "quit"]
    alone = _job("0", base)
    os.kill(alone.pid, signal.SIGKILL)  # the last job dies: its daemon is left running
    alone.wait()
    _end(_job("0", base))  # the next job finds it unused: stops it, starts its own, stops that at the end
    assert [c["what"] for c in mps_standin.calls(standin)] == ["start", "quit"] * 3


def test_each_gpu_set_and_slurm_allocation_has_a_daemon_of_its_own(standin, tmp_path):
    base = tmp_path / "locks"
    jobs = [_job("0", base), _job("1", base), _job("0", base, SLURM_JOB_ID="17")]
    try:
        pipes = [j.said[0] for j in jobs]
        assert len(set(pipes)) == 3 and "-17-" in Path(pipes[2]).parent.name
        assert [c["what"] for c in mps_standin.calls(standin)] == ["start"] * 3
        assert [c["slurm_job"] for c in mps_standin.calls(standin)] == ["", "", "17"]
    finally:
        for job in jobs:
            _end(job)
    assert [c["what"] for c in mps_standin.calls(standin)] == ["start"] * 3 + ["quit"] * 3


def test_without_the_control_program_the_job_stops_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    before = dict(os.environ)
    said = r"nvidia-cuda-mps-control is not on PATH on .*set resources\.mps: false"
    with pytest.raises(mps.MpsError, match=said):
        mps.join(["0"], tmp_path / "locks")
    assert dict(os.environ) == before  # no pipe folder for CUDA to try


def test_a_daemon_that_does_not_start_is_one_line_naming_its_log(tmp_path, monkeypatch):
    failing = tmp_path / "bin" / "nvidia-cuda-mps-control"
    failing.parent.mkdir()
    failing.write_text("#!/bin/sh\necho 'An instance of this daemon is already running' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("PATH", mps_standin.path_with(failing.parent))
    said = r"-d failed on .* \(exit 1: An instance of this daemon is already running; its log: .*/log\)"
    with pytest.raises(mps.MpsError, match=said):
        mps.join(["0"], tmp_path / "locks")
