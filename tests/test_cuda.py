"""A torch build the node's driver or GPU cannot run is named in one line, with its fix, before the first
GPU job (contrastlab.cuda). A stand-in ``nvidia-smi`` on ``PATH`` reports the driver and the GPU, and the
installed torch's build is replaced where the case needs another."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from contrastlab import cuda
from contrastlab.workflow import gpus

CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """``fake_smi("535.104.05", "Tesla V100-SXM2-32GB", "7.0")`` puts an ``nvidia-smi`` on PATH that
    answers the query contrastlab makes as that node would."""

    def install(driver: str, name: str, capability: str, count: int = 1) -> None:
        script = tmp_path / "nvidia-smi"
        line = f"{name}, {driver}, {capability}"
        script.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for _ in range(count)))
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    return install


def _stack(torch_cuda: str | None, arch: list[str]) -> cuda.GpuStack:
    driver, found = cuda.query_nvidia_smi()
    return cuda.GpuStack(driver, found, "2.14.1", torch_cuda, arch)


def test_an_old_driver_is_named_with_the_torch_build_that_runs_on_it(fake_smi):
    fake_smi("535.104.05", "NVIDIA A100-SXM4-40GB", "8.0", count=4)
    stack = _stack("13.0", CU130)
    assert [str(gpu) for gpu in stack.gpus] == ["NVIDIA A100-SXM4-40GB (compute capability 8.0)"] * 4
    line = cuda.diagnose(stack)
    assert line == (
        "torch 2.14.1 needs CUDA 13.0, i.e. an NVIDIA driver >= 580.65, and this node has NVIDIA driver "
        "535.104.05, NVIDIA A100-SXM4-40GB (compute capability 8.0); fix: make install CUDA=12.6 (torch for "
        "CUDA 12.6: driver >= 525, Maxwell to Hopper (P100, V100, T4, A100, H100))"
    )


def test_a_v100_on_a_new_driver_lacks_kernels_in_the_cuda_13_build(fake_smi):
    fake_smi("580.82.07", "Tesla V100-SXM2-32GB", "7.0")
    line = cuda.diagnose(_stack("13.0", CU130))
    assert "has no kernels for Tesla V100-SXM2-32GB (compute capability 7.0)" in line
    assert line.endswith("fix: make install CUDA=12.6 (torch for CUDA 12.6: driver >= 525, Maxwell to Hopper "
                         "(P100, V100, T4, A100, H100))")  # fmt: skip
    # the CUDA 12.6 build has sm_70: nothing to say
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert cuda.diagnose(_stack("12.6", cu126)) is None


def test_what_runs_says_nothing_and_no_gpu_is_not_judged(fake_smi, monkeypatch):
    fake_smi("580.82.07", "NVIDIA H100 80GB HBM3", "9.0")
    assert cuda.diagnose(_stack("13.0", CU130)) is None
    # PTX of an older generation runs (JIT) on newer ones
    fake_smi("590.10", "NVIDIA B300", "10.3")
    assert cuda.diagnose(_stack("13.0", [*CU130[:-1], "compute_100"])) is None
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: a CPU machine, nothing to judge
    assert cuda.query_nvidia_smi() == (None, []) and cuda.diagnose(_stack("13.0", CU130)) is None


def test_a_cpu_build_on_a_gpu_node_and_a_driver_no_build_runs_on(fake_smi):
    fake_smi("550.54.15", "NVIDIA L40S", "8.9")
    line = cuda.diagnose(_stack(None, []))
    assert line.startswith("torch 2.14.1 is a CPU build and cannot use the GPU (NVIDIA driver 550.54.15")
    fake_smi("470.82.01", "Tesla P100-PCIE-16GB", "6.0")
    line = cuda.diagnose(_stack("13.0", CU130))
    assert "driver >= 580.65, and this node has NVIDIA driver 470.82.01" in line
    assert line.endswith("fix: ask the cluster's admins for a driver >= 580, or run on the CPU with config "
                         "resources.gpu: 0")  # fmt: skip


@pytest.mark.fault(
    "GPU stack: node driver older than the torch build", "the GPU job's first line names the fix"
)
def test_a_gpu_job_on_such_a_node_stops_with_the_line(fake_smi, monkeypatch, observed):
    fake_smi("535.104.05", "Tesla V100-SXM2-32GB", "7.0")
    monkeypatch.setattr(cuda, "probe", lambda: _stack("13.0", CU130))
    job = SimpleNamespace(resources={"gpu": 1})
    with pytest.raises(gpus.GpuUnavailableError) as error:
        gpus.require_requested_gpu(job)
    message = str(error.value)
    assert "asked for 1 GPU(s)" in message and "make install CUDA=12.6" in message and "\n" not in message
    gpus.require_requested_gpu(SimpleNamespace(resources={"gpu": 0}))  # a CPU job is not judged
    observed(message[message.index("torch") :][:100] + "...")


def test_make_gpu_check_stops_with_the_same_line(fake_smi, monkeypatch, repo_root, tmp_path):
    """The pre-flight: ``make gpu-check`` prints the line before it starts anything."""
    fake_smi("535.104.05", "Tesla V100-SXM2-32GB", "7.0")
    code = (
        "import sys, runpy; sys.argv = ['gpu_check.py'];"
        "import contrastlab.cuda as c, torch;"
        "c.probe = lambda: c.GpuStack(*c.query_nvidia_smi(), '2.14.1', '13.0', ['sm_75', 'sm_80', 'sm_90']);"
        f"runpy.run_path({str(repo_root / 'scripts' / 'gpu_check.py')!r}, run_name='__main__')"
    )
    # cwd: the preset's relative results_dir and resources_dir, were the check to get that far, are not the
    # checkout's
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("contrastlab:")]
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("contrastlab: make gpu-check: torch 2.14.1 needs CUDA 13.0")
    assert "NVIDIA driver 535.104.05, Tesla V100-SXM2-32GB (compute capability 7.0)" in lines[0]


def test_a_gpu_job_whose_torch_sees_its_gpu_asks_no_nvidia_smi(monkeypatch):
    """nvidia-smi (0.5-1 s a job) only to explain a failure; cuInit timed as a phase of its own."""
    from contrastlab.training import phases

    def no_smi():
        raise AssertionError("nvidia-smi asked on the success path")

    monkeypatch.setattr(phases, "_FRAME_PHASES", {})
    monkeypatch.setattr(gpus, "probe", no_smi)
    monkeypatch.setattr(gpus, "runs_on_visible_gpus", lambda: True)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    gpus.require_requested_gpu(SimpleNamespace(resources={"gpu": 1}))
    assert set(phases._FRAME_PHASES) == {"cuda_driver_s"}
    # a GPU torch has no kernels for: nvidia-smi explains it
    monkeypatch.setattr(gpus, "runs_on_visible_gpus", lambda: False)
    with pytest.raises(AssertionError, match="nvidia-smi asked"):
        gpus.require_requested_gpu(SimpleNamespace(resources={"gpu": 1}))
