"""GPU slots for Snakemake jobs: how many GPUs a job asked for, which visible GPU it gets (claimed under
lock files so that concurrent jobs never share one, or, for a small cell kind with ``resources.gpu_share``
on, share it with at most ``gpu_share - 1`` others, under an MPS daemon with ``resources.mps``:
:mod:`contrastlab.workflow.mps`), and the device string its script uses."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from contrastlab.cost.packing import SHARES
from contrastlab.cuda import diagnose, probe, runs_on_visible_gpus
from contrastlab.training.phases import note_phase
from contrastlab.workflow import mps
from contrastlab.workflow.failures import cell_label, snakemake_dict


class GpuUnavailableError(RuntimeError):
    """A job that asked the scheduler for a GPU sees none (it would otherwise run on the CPU)."""


def requested_gpus(snakemake: Any) -> int:
    """GPUs the job asked for: its ``gpu`` resource, or the count of a ``gres`` such as ``gpu:1`` or
    ``gpu:a100:2`` (the ``profiles/slurm-gres`` form); 0 when it asked for none."""
    resources = snakemake_dict(snakemake, "resources")
    gpus = resources.get("gpu") or 0
    gpus = gpus if isinstance(gpus, int) else 0  # an unevaluated resource ("<TBD>") asks for nothing
    gres = str(resources.get("gres") or "")
    for item in filter(None, gres.split(",")):
        name, *rest = item.strip().split(":")
        if name == "gpu":
            count = rest[-1] if rest and rest[-1].isdigit() else "1"
            gpus = max(gpus, int(count))
    return gpus


def requested_share(snakemake: Any) -> int:
    """How many jobs may run on this job's GPU, itself included: its ``gpu_share`` resource (set by the
    training rules from :func:`contrastlab.cost.packing.job_share`), 1 when absent or unevaluated."""
    share = snakemake_dict(snakemake, "resources").get("gpu_share")
    return share if isinstance(share, int) and share >= 1 else 1


def require_requested_gpu(snakemake: Any) -> None:
    """Raise :class:`GpuUnavailableError` when the job asked for a GPU (:func:`requested_gpus`) and torch
    sees none: on a node whose driver or CUDA is broken, the job would otherwise train for hours on the
    CPU. A job that asked for no GPU is left to run wherever it is."""
    wanted = requested_gpus(snakemake)
    if not wanted:
        return
    import torch

    began = time.perf_counter()
    available = torch.cuda.is_available()  # cuInit: the driver's start, a phase of its own
    note_phase("cuda_driver_s", time.perf_counter() - began)
    if available and runs_on_visible_gpus():
        return  # nvidia-smi only to explain a failure: ~0.5-1 s a job on the success path
    # The driver or the GPU's generation that the installed torch cannot run on: the line that names the
    # fix (another torch build), not the node's driver (contrastlab.cuda).
    began = time.perf_counter()
    problem = diagnose(probe())
    note_phase("nvidia_smi_s", time.perf_counter() - began)
    if problem is not None:
        raise GpuUnavailableError(f"this job asked for {wanted} GPU(s) on {platform.node()}: {problem}")
    if available:
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise GpuUnavailableError(
        f"this job asked for {wanted} GPU(s) but torch sees none (torch.cuda.is_available() is False on "
        f"{platform.node()}; CUDA_VISIBLE_DEVICES={visible if visible is not None else 'unset'}, torch "
        f"{torch.__version__} built for CUDA {torch.version.cuda}); it would run on the CPU instead. Fix "
        "the node's driver/CUDA (or exclude the node), or run on the CPU on purpose with config "
        "resources.gpu: 0 (or --set-resources <rule>:gpu=0)"
    )


#: Lock files of the GPU slots (:func:`claim_gpus`), ``gpu-<device>-<slot>.lock``: machine-wide, so
#: that two Snakemake runs on one box (the grid and ``make gpu-check`` or ``make search``) share its
#: GPUs too; a fixed folder, not the job's ``TMPDIR`` (which Snakemake or a scheduler may set per job).
#: ``CONTRASTLAB_GPU_LOCK_DIR`` replaces it.
GPU_LOCK_DIR = Path("/tmp/contrastlab-gpu-slots")
#: Slots per GPU, fixed for the machine (not per run, so that two runs with different ``gpu_share`` see
#: the same slots): a job that may share its GPU with ``n - 1`` others holds ``SLOTS_PER_GPU // n`` of
#: them, a job of its own holds them all, so no device ever runs more than ``n`` jobs of share ``n``.
SLOTS_PER_GPU = max(SHARES)
#: The slots this process holds: the open lock files. The kernel releases an ``fcntl`` lock when its
#: process ends or dies (SIGKILL, out-of-memory kill), so a dead job never blocks a slot.
_HELD_SLOTS: list[Any] = []


def visible_gpus() -> list[str]:
    """The GPUs this process may use, without initialising CUDA: the entries of
    ``CUDA_VISIBLE_DEVICES`` when it is set, else one index per NVIDIA GPU the driver lists
    (``/proc/driver/nvidia/gpus``, or ``nvidia-smi -L`` where that folder is absent: WSL2, some
    containers); ``[]`` on a machine without one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    with contextlib.suppress(OSError):
        return [str(i) for i in range(len(list(Path("/proc/driver/nvidia/gpus").iterdir())))]
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i in range(sum(line.startswith("GPU ") for line in listed.splitlines()))]


def local_device_refusal(jobs: Iterable[Any], *, local: bool, gpus: Callable = visible_gpus) -> str | None:
    """The one line on which a ``local`` run (its jobs run here) stops before any of its ``jobs``, where one
    asks for a device it would not get: GPUs where ``gpus()`` lists none (asked once, and only then), or
    ``cuda_graph: true`` on the CPU (``resources.gpu: 0``); in the job, the error came after Snakemake had
    removed the cell's finished checkpoint. None otherwise, and for a SLURM run: its job checks its node."""
    listed = functools.cache(gpus)
    for job in jobs if local else ():
        wanted, cell = requested_gpus(job), cell_label(snakemake_dict(job, "wildcards"))
        if wanted and not listed():
            return (
                f"rule {job.rule.name} {cell} asks for {wanted} GPU(s) (config resources.gpu), but this "
                "machine has none; run it on a GPU machine (or a cluster: docs/cluster.md), or on the CPU "
                "with config resources.gpu: 0"
            )
        if not wanted and (snakemake_dict(job, "params").get("settings") or {}).get("cuda_graph"):
            return (
                f"rule {job.rule.name} {cell} asks for cuda_graph: true, but its job runs on the CPU (config "
                "resources.gpu: 0); set cuda_graph: false for this cell in the config (the eager step "
                "computes the same numbers)"
            )
    return None


def lock_folder(lock_dir: str | os.PathLike | None = None) -> Path:
    """The folder of the GPU slot locks (``lock_dir``, else ``CONTRASTLAB_GPU_LOCK_DIR``, else
    :data:`GPU_LOCK_DIR`), created for every user of the machine (and the MPS daemons' folders)."""
    folder = Path(lock_dir or os.environ.get("CONTRASTLAB_GPU_LOCK_DIR") or GPU_LOCK_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # other users' jobs share the box's GPUs too
        folder.chmod(0o1777)
    return folder


def _try_lock(path: Path) -> int | None:
    """An exclusive ``fcntl`` lock on ``path`` (created if absent): its open descriptor, or ``None``
    when another process holds it."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as error:
        raise OSError(
            f"cannot open the GPU slot lock {path} ({error.strerror}); set CONTRASTLAB_GPU_LOCK_DIR to a "
            "folder every job on this machine can write"
        ) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def claim_gpus(
    wanted: int,
    devices: list[str],
    lock_dir: str | os.PathLike | None = None,
    *,
    share: int = 1,
    poll_seconds: float = 2.0,
    log: Any = None,
) -> list[str]:
    """Claim ``wanted`` of ``devices`` for this process under exclusive ``fcntl`` locks on
    ``SLOTS_PER_GPU // share`` of each one's slot files ``<lock_dir>/gpu-<device>-<slot>.lock`` (all for
    ``share`` 1), held until the process ends or dies. The least loaded devices go first. All or nothing: a
    job that finds too few releases every slot and waits (polling, one line to ``log``), so that jobs
    wanting two GPUs never hold one each forever. Devices a scheduler chose (SLURM sets ``SLURM_JOB_GPUS`` or
    ``SLURM_STEP_GPUS`` with ``CUDA_VISIBLE_DEVICES`` for a job's ``--gpus``/``--gres``: its own),
    no more than wanted, are taken without a lock."""
    if share not in SHARES:
        raise ValueError(f"gpu_share must be one of {', '.join(map(str, SHARES))}, got {share!r}")
    by_scheduler = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("SLURM_STEP_GPUS")
    if wanted <= 0 or (len(devices) <= wanted and by_scheduler):
        return list(devices)
    if wanted > len(devices):
        raise GpuUnavailableError(
            f"this job asked for {wanted} GPUs but only {len(devices)} are visible ({', '.join(devices)})"
        )
    folder = lock_folder(lock_dir)
    slots = SLOTS_PER_GPU // share
    said = False
    while True:
        free = {  # every free slot of each device locked: the descriptors of the slots now held
            device: [
                fd
                for slot in range(SLOTS_PER_GPU)
                if (fd := _try_lock(folder / f"gpu-{device}-{slot}.lock")) is not None
            ]
            for device in devices
        }
        # most free slots first; sorted() is stable, so ties keep the visible order
        chosen = [d for d in sorted(devices, key=lambda d: -len(free[d])) if len(free[d]) >= slots][:wanted]
        kept = {d: free[d][:slots] for d in chosen} if len(chosen) == wanted else {}
        for device, fds in free.items():  # not enough: hold none while waiting
            for fd in fds[len(kept.get(device, [])) :]:
                os.close(fd)
        if kept:
            _HELD_SLOTS.extend(fd for fds in kept.values() for fd in fds)
            return chosen
        if not said and log is not None:
            what = "free GPUs" if share == 1 else f"GPUs with a free slot (of {share} per GPU)"
            print(f"contrastlab: fewer than {wanted} {what} among {', '.join(devices)}; waiting", file=log)
            said = True
        time.sleep(poll_seconds)


def mps_asked(snakemake: Any) -> bool:
    """Whether the job runs under an MPS daemon: it shares its GPU (:func:`requested_share` > 1) and the
    config asks for MPS (``resources.mps``), which make plan priced it with."""
    config = getattr(snakemake, "config", None) or {}
    return requested_share(snakemake) > 1 and bool((config.get("resources") or {}).get("mps"))


def job_device(snakemake: Any) -> str:
    """The device a training or evaluation job runs on, decided before torch touches CUDA: ``"cpu"`` for
    ``resources.gpu: 0`` (CUDA hidden), else ``"cuda"`` on GPUs of its own (:func:`claim_gpus` of
    :func:`visible_gpus`, set in ``CUDA_VISIBLE_DEVICES``), shared with at most ``gpu_share`` - 1 others; a
    job under ``resources.mps`` joins its GPUs' MPS daemon first (:func:`contrastlab.workflow.mps.join`).
    Raises :class:`GpuUnavailableError` when a GPU was asked for and torch sees none."""
    wanted = requested_gpus(snakemake)
    claimed: list[str] = []
    began = time.perf_counter()
    if wanted:
        devices = visible_gpus()
        if devices:
            claimed = claim_gpus(wanted, devices, share=requested_share(snakemake), log=sys.stderr)
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claimed)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if mps_asked(snakemake):  # before CUDA starts: a client reads the daemon's pipe folder then
        mps.join(claimed, lock_folder(), log=sys.stderr)
    if not wanted:
        return "cpu"
    note_phase("gpu_claim_s", time.perf_counter() - began)  # the claim apart from its imports
    require_requested_gpu(snakemake)
    return "cuda"
