"""GPUs used one job each: concurrent jobs claim different GPUs under file locks, a dead job's GPU is
free again at once, and ``resources.gpu: 0`` means the CPU (contrastlab.workflow.job_device). Fake
device lists: no GPU is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from contrastlab.workflow.gpus import GpuUnavailableError, claim_gpus, job_device, visible_gpus

#: A job: claims one of the fake GPUs, says which, and holds it until killed.
JOB = """
import sys, time
from contrastlab.workflow.gpus import claim_gpus
print(",".join(claim_gpus(1, sys.argv[1].split(","), sys.argv[2], poll_seconds=0.05)), flush=True)
time.sleep(600)
"""


def _start(devices: str, lock_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", JOB, devices, str(lock_dir)], stdout=subprocess.PIPE, text=True
    )


def _claimed(job: subprocess.Popen) -> str:
    return job.stdout.readline().strip()


def test_concurrent_jobs_get_different_gpus_and_a_killed_job_frees_its_own(tmp_path):
    lock_dir = tmp_path / "locks"
    jobs = [_start("0,1,2", lock_dir) for _ in range(3)]
    try:
        claimed = [_claimed(job) for job in jobs]
        assert sorted(claimed) == ["0", "1", "2"]
        waiting = _start("0,1,2", lock_dir)  # a fourth job: every GPU is taken, it waits
        jobs.append(waiting)
        time.sleep(0.5)
        assert waiting.poll() is None
        os.kill(jobs[1].pid, signal.SIGKILL)  # dies without releasing anything itself
        assert _claimed(waiting) == claimed[1]
    finally:
        for job in jobs:
            job.kill()
            job.wait()


def test_no_lock_when_the_job_sees_only_the_gpus_it_asked_for(tmp_path):
    # SLURM (or the user) already chose them: a second job with the same visible list is not blocked.
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(2, ["4", "5"], tmp_path) == ["4", "5"]
    assert not list(tmp_path.iterdir())
    assert claim_gpus(0, ["0", "1"], tmp_path) == ["0", "1"]


def test_one_process_claims_two_different_gpus(tmp_path):
    assert sorted(claim_gpus(2, ["0", "1", "2"], tmp_path)) == ["0", "1"]


def _job(**resources) -> SimpleNamespace:
    return SimpleNamespace(rule="train", wildcards={}, resources=resources, config={})


def test_gpu_zero_means_the_cpu_and_hides_cuda(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert job_device(_job(gpu=0)) == "cpu"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert visible_gpus() == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="fake device numbers on a machine without a GPU")
def test_a_gpu_job_gets_one_of_the_visible_gpus_before_cuda_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setenv("CONTRASTLAB_GPU_LOCK_DIR", str(tmp_path))
    with pytest.raises(GpuUnavailableError, match=r"CUDA_VISIBLE_DEVICES=3, "):
        job_device(_job(gpu=1))  # no real GPU here: the one-line error, naming the GPU it was given
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"  # the first free one, held under its lock
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-3.lock"]
