"""GPUs used one job each (contrastlab.workflow.job_device): concurrent jobs claim different GPUs under
file locks, a dead job's GPU is free at once, ``resources.gpu: 0`` means the CPU, ``gpu_share`` n puts at
most n small jobs on a GPU. Fake device lists: no GPU is needed."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from fcntl import LOCK_EX
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from contrastlab.workflow import gpus
from contrastlab.workflow.gpus import (
    GpuUnavailableError,
    claim_gpus,
    job_device,
    local_device_refusal,
    requested_share,
    visible_gpus,
)
from contrastlab.workflow.job_start import locked_elsewhere

#: A job: claims ``wanted`` of the fake GPUs, says which, and holds them until killed.
JOB = """
import sys, time
from contrastlab.workflow.gpus import claim_gpus
wanted, share = int(sys.argv[3]), int(sys.argv[4])
devices = sys.argv[1].split(",")
print(",".join(claim_gpus(wanted, devices, sys.argv[2], share=share, poll_seconds=0.05)), flush=True)
time.sleep(600)
"""


def _start(devices: str, lock_dir: Path, wanted: int = 1, share: int = 1) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    command = [sys.executable, "-c", JOB, devices, str(lock_dir), str(wanted), str(share)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _claimed(job: subprocess.Popen) -> str:
    return job.stdout.readline().strip()


def _waiting(job: subprocess.Popen, seconds: float = 0.5) -> bool:
    """Whether ``job`` is still waiting for its GPUs after ``seconds`` (alive, nothing claimed yet)."""
    ready, _, _ = select.select([job.stdout], [], [], seconds)
    return not ready and job.poll() is None


@pytest.fixture
def jobs():
    """The jobs a test starts (it adds them): killed at its end."""
    started: list[subprocess.Popen] = []
    yield started
    _stop(started)


def _stop(jobs: list[subprocess.Popen]) -> None:
    for job in jobs:
        job.kill()
        job.wait()


def test_concurrent_jobs_get_different_gpus_and_a_killed_job_frees_its_own(tmp_path, jobs):
    jobs += [_start("0,1,2", tmp_path) for _ in range(3)]
    claimed = [_claimed(job) for job in jobs]
    assert sorted(claimed) == ["0", "1", "2"]
    jobs.append(_start("0,1,2", tmp_path))
    assert _waiting(jobs[3])  # a fourth job: every GPU is taken, it waits
    os.kill(jobs[1].pid, signal.SIGKILL)  # dies without releasing anything itself
    assert _claimed(jobs[3]) == claimed[1]


def test_no_lock_when_slurm_chose_the_gpus(tmp_path, monkeypatch):
    # SLURM gave the job exactly these: a second job with the same visible list is not blocked.
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(1, ["0"], tmp_path) == ["0"]
    assert claim_gpus(2, ["4", "5"], tmp_path) == ["4", "5"]
    assert not list(tmp_path.iterdir())
    assert claim_gpus(0, ["0", "1"], tmp_path) == ["0", "1"]


def test_a_job_wanting_two_gpus_holds_none_while_it_waits(tmp_path, jobs):
    """All or nothing: two jobs wanting two of three GPUs each cannot deadlock holding one each, and
    the one that waits leaves the free GPU to a one-GPU job."""
    jobs += [_start("0,1,2", tmp_path, wanted=2)]
    first = _claimed(jobs[0]).split(",")
    assert len(first) == 2
    jobs.append(_start("0,1,2", tmp_path, wanted=2))
    assert _waiting(jobs[1])
    jobs.append(_start("0,1,2", tmp_path, wanted=1))
    (free,) = {"0", "1", "2"} - set(first)
    assert _claimed(jobs[2]) == free
    jobs[0].kill()
    assert sorted(_claimed(jobs[1]).split(",")) == sorted(first)


def test_an_unusable_lock_file_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / "gpu-0-0.lock").mkdir()  # a lock path that cannot be opened as a file
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


def test_one_process_claims_two_different_gpus_and_never_more_than_visible(tmp_path):
    assert sorted(claim_gpus(2, ["0", "1", "2"], tmp_path)) == ["0", "1"]
    with pytest.raises(GpuUnavailableError, match="asked for 2 GPUs but only 1 are visible"):
        claim_gpus(2, ["2"], tmp_path)


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
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"  # the first free one, held under its locks
    # this process's own claims too: ``flock`` locks belong to an open file, and this is a new one
    held = [p.name for p in sorted(tmp_path.iterdir()) if locked_elsewhere(os.open(p, os.O_RDONLY), LOCK_EX)]
    assert held == [f"gpu-3-{slot}.lock" for slot in range(4)]  # all its slots: a GPU of its own


@pytest.mark.parametrize("share", [2, 4])
def test_shared_slots_put_k_jobs_on_each_gpu_and_never_more(tmp_path, share, jobs):
    """resources.gpu_share k: 2k small jobs on two fake GPUs, k on each (spread: the least loaded first);
    one more waits until a holder dies (SIGKILL), then takes that holder's GPU."""
    jobs += [_start("0,1", tmp_path, share=share) for _ in range(2 * share)]
    claimed = [_claimed(job) for job in jobs]
    assert sorted(claimed) == sorted(["0", "1"] * share)
    jobs.append(_start("0,1", tmp_path, share=share))
    assert _waiting(jobs[-1])  # a (k+1)-th job on either GPU: never
    victim = claimed.index("1")
    os.kill(jobs[victim].pid, signal.SIGKILL)
    assert _claimed(jobs[-1]) == "1"


@pytest.mark.parametrize("first", [1, 2], ids=["whole-gpu", "small"])
def test_a_job_of_its_own_waits_for_an_empty_gpu_and_small_ones_fill_the_rest(tmp_path, jobs, first):
    """A whole-GPU job (share 1) never runs beside small ones, and small ones never beside it; beside
    another whole-GPU job it queues too (one visible GPU is locked, so the grid and make gpu-check queue
    for it)."""
    jobs += [_start("0", tmp_path, share=first)]
    assert _claimed(jobs[0]) == "0"
    jobs.append(_start("0", tmp_path, share=1))
    assert _waiting(jobs[1])  # one job, even a small one, is enough to keep it out
    jobs[0].kill()
    assert _claimed(jobs[1]) == "0"
    jobs.append(_start("0", tmp_path, share=4))
    assert _waiting(jobs[2])  # the whole-GPU job keeps every slot


def test_mixed_shares_respect_each_jobs_limit(tmp_path, jobs):
    """A share-2 job takes half the slots, so beside it fit one more share-2 job or two share-4 jobs."""
    jobs += [_start("0", tmp_path, share=2), _start("0", tmp_path, share=4), _start("0", tmp_path, share=4)]
    assert [_claimed(job) for job in jobs] == ["0", "0", "0"]
    jobs.append(_start("0", tmp_path, share=4))
    assert _waiting(jobs[-1])


def test_two_gpu_requests_do_not_deadlock_while_slots_are_shared(tmp_path, jobs):
    """Small jobs (share 2) on both GPUs: two jobs wanting both GPUs to themselves wait holding nothing,
    so a small job still gets the slot left; once the small ones end, the two-GPU jobs run one after the
    other."""
    small = [_start("0,1", tmp_path, share=2) for _ in range(3)]
    jobs += small
    placed = [_claimed(job) for job in small]
    assert sorted(set(placed)) == ["0", "1"]  # spread over both, two on one of them
    (room,) = [d for d in ("0", "1") if placed.count(d) == 1]
    big = [_start("0,1", tmp_path, wanted=2) for _ in range(2)]
    jobs += big
    assert all(_waiting(job) for job in big)
    small.append(_start("0,1", tmp_path, share=2))
    jobs.append(small[-1])
    assert _claimed(small[-1]) == room  # not kept out by the two-GPU jobs waiting
    _stop(small)
    ready, _, _ = select.select([job.stdout for job in big], [], [], 10.0)
    assert len(ready) == 1  # one of them has both GPUs, the other still waits
    first = next(job for job in big if job.stdout is ready[0])
    assert sorted(_claimed(first).split(",")) == ["0", "1"]
    (second,) = [job for job in big if job is not first]
    assert _waiting(second)
    first.kill()
    assert sorted(_claimed(second).split(",")) == ["0", "1"]


def test_a_share_that_is_not_a_slot_count_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="gpu_share must be one of 1, 2, 4, got 3"):
        claim_gpus(1, ["0"], tmp_path, share=3)


def test_a_shared_gpu_joins_the_mps_daemon_before_cuda_starts_when_the_config_asks(monkeypatch, tmp_path):
    """resources.mps: a job that shares its GPU (gpu_share > 1) joins the daemon of the GPU it claimed
    before torch looks at CUDA; a job with a GPU of its own, or without resources.mps, joins none."""
    order = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    monkeypatch.setenv("CONTRASTLAB_GPU_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(
        gpus.mps, "join", lambda devices, base, log=None: order.append(("mps", devices, base))
    )
    monkeypatch.setattr(gpus, "require_requested_gpu", lambda job: order.append(("cuda",)))
    mps_on = {"resources": {"mps": True}}
    assert job_device(SimpleNamespace(resources={"gpu": 1, "gpu_share": 2}, config=mps_on)) == "cuda"
    assert order == [("mps", ["2"], tmp_path), ("cuda",)]
    order.clear()
    for share, config in ((2, {"resources": {"mps": False}}), (1, mps_on)):
        monkeypatch.setenv("CONTRASTLAB_GPU_LOCK_DIR", str(tmp_path / f"share{share}"))  # slots of their own
        job_device(SimpleNamespace(resources={"gpu": 1, "gpu_share": share}, config=config))
    assert order == [("cuda",), ("cuda",)]


def test_the_share_comes_from_the_jobs_gpu_share_resource():
    assert requested_share(_job(gpu=1, gpu_share=4)) == 4
    assert requested_share(_job(gpu=1)) == 1
    assert requested_share(_job(gpu=1, gpu_share="<TBD>")) == 1  # an unevaluated resource


def _train(gpu: int, graph: bool | None = None) -> SimpleNamespace:
    cell, settings = {"experiment": "macl", "backbone": "tiny-bert", "method": "macl", "seed": "42"}, {}
    settings["settings"] = {"cuda_graph": graph}
    return SimpleNamespace(
        rule=SimpleNamespace(name="train"), wildcards=cell, resources={"gpu": gpu}, params=settings
    )


def test_a_local_run_refuses_a_device_its_job_would_not_get_before_any_job_starts():
    """In the job the error came after Snakemake had removed the cell's finished checkpoint."""
    asks = "rule train macl/tiny-bert/macl/seed42 asks for"
    line = local_device_refusal([_train(0), _train(0, True)], local=True)
    assert line.startswith(f"{asks} cuda_graph: true, but its job runs on the CPU") and "\n" not in line
    assert local_device_refusal([_train(1, True)], local=True, gpus=list).startswith(
        f"{asks} 1 GPU(s) (config"
    )
    assert local_device_refusal([_train(1, True), _train(1)], local=True, gpus=lambda: ["0"]) is None
    assert local_device_refusal([_train(0, False)], local=True, gpus=lambda: pytest.fail("looked")) is None
    # SLURM: in its job
    assert local_device_refusal([_train(1), _train(0, True)], local=False, gpus=list) is None
