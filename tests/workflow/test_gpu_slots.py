"""GPUs used one job each: concurrent jobs claim different GPUs under file locks, a dead job's GPU is
free again at once, and ``resources.gpu: 0`` means the CPU (contrastlab.workflow.job_device). Fake
device lists: no GPU is needed."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from contrastlab.workflow.gpus import GpuUnavailableError, claim_gpus, job_device, visible_gpus

#: A job: claims ``wanted`` of the fake GPUs, says which, and holds them until killed.
JOB = """
import sys, time
from contrastlab.workflow.gpus import claim_gpus
wanted = int(sys.argv[3])
print(",".join(claim_gpus(wanted, sys.argv[1].split(","), sys.argv[2], poll_seconds=0.05)), flush=True)
time.sleep(600)
"""


def _start(devices: str, lock_dir: Path, wanted: int = 1) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.Popen(
        [sys.executable, "-c", JOB, devices, str(lock_dir), str(wanted)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _claimed(job: subprocess.Popen) -> str:
    return job.stdout.readline().strip()


def _waiting(job: subprocess.Popen, seconds: float = 0.5) -> bool:
    """Whether ``job`` is still waiting for its GPUs after ``seconds`` (alive, nothing claimed yet)."""
    ready, _, _ = select.select([job.stdout], [], [], seconds)
    return not ready and job.poll() is None


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


def test_no_lock_when_slurm_chose_the_gpus(tmp_path, monkeypatch):
    # SLURM gave the job exactly these: a second job with the same visible list is not blocked.
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(2, ["4", "5"], tmp_path) == ["4", "5"]
    assert not list(tmp_path.iterdir())
    assert claim_gpus(0, ["0", "1"], tmp_path) == ["0", "1"]


def test_two_runs_on_a_one_gpu_box_queue_for_its_gpu(tmp_path):
    """Issue 36: with one visible GPU nothing was locked, so the grid and make gpu-check shared it."""
    jobs = [_start("0", tmp_path / "locks")]
    try:
        assert _claimed(jobs[0]) == "0"
        jobs.append(_start("0", tmp_path / "locks"))
        assert _waiting(jobs[1])  # for the GPU
        jobs[0].kill()
        assert _claimed(jobs[1]) == "0"
    finally:
        for job in jobs:
            job.kill()
            job.wait()


def test_a_job_wanting_two_gpus_holds_none_while_it_waits(tmp_path):
    """All or nothing: two jobs wanting two of three GPUs each cannot deadlock holding one each, and
    the one that waits leaves the free GPU to a one-GPU job."""
    lock_dir = tmp_path / "locks"
    jobs = [_start("0,1,2", lock_dir, wanted=2)]
    try:
        first = _claimed(jobs[0]).split(",")
        assert len(first) == 2
        jobs.append(_start("0,1,2", lock_dir, wanted=2))
        assert _waiting(jobs[1])
        jobs.append(_start("0,1,2", lock_dir, wanted=1))
        (free,) = {"0", "1", "2"} - set(first)
        assert _claimed(jobs[2]) == free
        jobs[0].kill()
        assert sorted(_claimed(jobs[1]).split(",")) == sorted(first)
    finally:
        for job in jobs:
            job.kill()
            job.wait()


def test_a_job_asking_more_gpus_than_visible_stops_with_one_line(tmp_path):
    with pytest.raises(GpuUnavailableError, match="asked for 2 GPUs but only 1 are visible"):
        claim_gpus(2, ["0"], tmp_path)


def test_an_unusable_lock_file_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / "gpu-0.lock").mkdir()  # a lock path that cannot be opened as a file
    with pytest.raises(OSError, match="CONTRASTLAB_GPU_LOCK_DIR"):
        claim_gpus(1, ["0", "1"], tmp_path)


def test_the_lock_folder_is_machine_wide_whatever_the_jobs_tmpdir(tmp_path):
    code = "from contrastlab.workflow.gpus import GPU_LOCK_DIR; print(GPU_LOCK_DIR)"
    env = dict(os.environ, TMPDIR=str(tmp_path))  # Snakemake or a scheduler may set one per job
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "/tmp/contrastlab-gpu-slots"


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").exists(), reason="the driver lists this machine's GPUs")
def test_without_the_drivers_proc_folder_nvidia_smi_counts_the_gpus(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: a)'\necho 'GPU 1: NVIDIA H100 (UUID: b)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus() == ["0", "1"]


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
