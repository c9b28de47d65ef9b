"""Does the installed torch run on this machine's NVIDIA driver and GPUs? One line that says why not and
what fixes it, before the first GPU job rather than inside it.

Two facts decide it, and the torch wheel fixes both (the table per build: docs/cluster.md): the
**driver** (torch for CUDA 13.x needs a Linux driver >= 580, 12.x >= 525, 11.x >= 450: NVIDIA's
minor-version compatibility table) and the **GPU generation** (torch carries kernels for
``torch.cuda.get_arch_list()``: CUDA 13.0 builds sm_75 to sm_120, the "legacy" CUDA 12.6 builds sm_50 to
sm_90, which the P100 and V100 need).

:func:`probe` reads the driver and GPUs from ``nvidia-smi`` and the build from torch; :func:`diagnose`
turns them into the one line (or None) with the fixing command (``make install CUDA=12.6``:
:data:`BUILDS`). Tests hand :func:`probe` a stand-in ``nvidia-smi`` on ``PATH``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

#: The oldest driver each CUDA major version runs on (minor-version compatibility).
MIN_DRIVER = {11: (450, 80), 12: (525, 60), 13: (580, 65)}
#: The torch builds ``make install CUDA=...`` offers: CUDA version -> (compute capabilities with kernels,
#: what that covers). "cpu" needs no driver.
BUILDS = {
    "13.0": ((75, 80, 86, 90, 100, 120), "Turing to Blackwell (T4, A100, H100, B200, RTX 20xx-50xx)"),
    "12.6": ((50, 60, 70, 75, 80, 86, 90), "Maxwell to Hopper (P100, V100, T4, A100, H100)"),
}


@dataclass
class Gpu:
    name: str
    capability: tuple[int, int]  # (7, 0) for a V100

    @property
    def sm(self) -> int:
        return self.capability[0] * 10 + self.capability[1]

    def __str__(self) -> str:
        return f"{self.name} (compute capability {self.capability[0]}.{self.capability[1]})"


@dataclass
class GpuStack:
    """What decides whether torch runs here: the driver and GPUs ``nvidia-smi`` reports (None and [] where
    there is none) and the installed torch's version, CUDA version (None for a CPU build) and kernels."""

    driver: str | None
    gpus: list[Gpu] = field(default_factory=list)
    torch_version: str = ""
    torch_cuda: str | None = None
    arch_list: list[str] = field(default_factory=list)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def query_nvidia_smi(timeout: float = 30.0) -> tuple[str | None, list[Gpu]]:
    """``(driver version, GPUs)`` from ``nvidia-smi`` (``(None, [])`` where it is missing or fails)."""
    try:  # no nvidia-smi on PATH: FileNotFoundError, an OSError
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, []
    driver, gpus = None, []
    for line in listed.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3:
            continue
        name, driver, capability = parts
        major, _, minor = capability.partition(".")
        if major.isdigit() and minor.isdigit():
            gpus.append(Gpu(name, (int(major), int(minor))))
    return driver, gpus


def probe() -> GpuStack:
    """This machine's driver and GPUs, and the installed torch's build."""
    import torch

    driver, gpus = query_nvidia_smi()
    cuda = torch.version.cuda
    arch = list(torch.cuda.get_arch_list()) if cuda else []
    return GpuStack(driver, gpus, torch.__version__, cuda, arch)


def _fix_for(stack: GpuStack) -> str:
    """The install command whose torch runs on this driver and GPU, or what else to do."""
    driver = _version(stack.driver or "0")
    for cuda, (capabilities, covers) in BUILDS.items():
        needed = MIN_DRIVER[_version(cuda)[0]]
        fits_driver = driver[:2] >= needed
        fits_gpus = all(gpu.sm in capabilities for gpu in stack.gpus)
        if fits_driver and fits_gpus and cuda != stack.torch_cuda:
            return f"make install CUDA={cuda} (torch for CUDA {cuda}: driver >= {needed[0]}, {covers})"
    return "ask the cluster's admins for a driver >= 580, or run on the CPU with config resources.gpu: 0"


def diagnose(stack: GpuStack) -> str | None:
    """One line saying why the installed torch cannot run on this machine's GPU and what fixes it, or None
    when it can (or when there is no NVIDIA GPU to judge)."""
    if stack.driver is None or not stack.gpus:
        return None
    where = f"NVIDIA driver {stack.driver}, {stack.gpus[0]}"
    if stack.torch_cuda is None:
        return (
            f"torch {stack.torch_version} is a CPU build and cannot use the GPU ({where}); fix: "
            f"{_fix_for(GpuStack(stack.driver, stack.gpus, stack.torch_version, 'cpu'))}"
        )
    needed = MIN_DRIVER.get(_version(stack.torch_cuda)[0])
    if needed is not None and _version(stack.driver)[:2] < needed:
        return (
            f"torch {stack.torch_version} needs CUDA {stack.torch_cuda}, i.e. an NVIDIA driver >= "
            f"{needed[0]}.{needed[1]}, and this node has {where}; fix: {_fix_for(stack)}"
        )
    if missing := [gpu for gpu in stack.gpus if not _has_kernels(stack.arch_list, gpu.sm)]:
        return (
            f"torch {stack.torch_version} (CUDA {stack.torch_cuda}) has no kernels for {missing[0]} (it has "
            f"{', '.join(stack.arch_list)}; NVIDIA driver {stack.driver}); fix: {_fix_for(stack)}"
        )
    return None


def no_gpu_line(command: str) -> str | None:
    """None where torch sees a CUDA GPU; else the one line saying ``command`` needs one, with torch's build
    and ``CUDA_VISIBLE_DEVICES``, ending "run it on a GPU node" (a caller may add its CPU alternative)."""
    import torch

    if torch.cuda.is_available():
        return None
    return (
        f"contrastlab: {command} needs a CUDA GPU and torch sees none (torch {torch.__version__}, CUDA "
        f"{torch.version.cuda}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); "
        "run it on a GPU node"
    )


def runs_on_visible_gpus() -> bool:
    """Whether the installed torch has kernels (or PTX) for every GPU it sees, asked of torch (no
    ``nvidia-smi``): the success path's check once ``torch.cuda.is_available()`` is true."""
    import torch

    arch_list = list(torch.cuda.get_arch_list())
    capabilities = [torch.cuda.get_device_capability(index) for index in range(torch.cuda.device_count())]
    return all(_has_kernels(arch_list, 10 * major + minor) for major, minor in capabilities)


def _has_kernels(arch_list: list[str], sm: int) -> bool:
    """Whether a torch built for ``arch_list`` runs on a GPU of capability ``sm``: an ``sm_XY`` entry of
    it, or a ``compute_XY`` one (PTX, JIT-compiled) of that capability or older."""
    ptx = [int(a.removeprefix("compute_")) for a in arch_list if a.startswith("compute_")]
    return f"sm_{sm}" in arch_list or any(sm >= p for p in ptx)
