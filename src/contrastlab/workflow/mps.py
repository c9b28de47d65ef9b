"""An NVIDIA MPS control daemon for the training jobs that share a GPU (``resources.gpu_share`` with
``resources.mps: true``), so that their kernels overlap instead of time-slicing
(docs/gpu-runs/h200-2026-11-28).

No hook runs around a group of Snakemake jobs, so the jobs run the daemon themselves (:func:`join`, from
:func:`contrastlab.workflow.gpus.job_device`, before CUDA starts): the first job of a GPU starts
``nvidia-cuda-mps-control -d`` under a lock, every job holds a shared lock on the daemon's folder while it
runs, and the last one to end sends ``quit`` (:func:`leave`). A daemon a killed job leaves is stopped and
started afresh by the next job that finds it unused. Each daemon has its own pipe and log folder, per
user, GPU set and SLURM allocation, so it neither joins nor stops a daemon of the machine or of another
job. Its clients number the GPUs from 0, as the MPS server renumbers the devices it serves (NVIDIA's MPS
guide, "Environment Variables")."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: The control program of NVIDIA's Multi-Process Service (from the driver's utilities).
MPS_CONTROL = "nvidia-cuda-mps-control"
#: Seconds a control command may take (starting the daemon, ``quit``).
CONTROL_TIMEOUT_S = 60
#: The daemons this process uses: their folder and the descriptor of its shared lock on them.
_JOINED: list[tuple[Path, int]] = []


class MpsError(RuntimeError):
    """The MPS daemon a job asked for (``resources.mps: true``) cannot be started on this node."""


def daemon_folder(devices: Sequence[str], base: str | os.PathLike) -> Path:
    """The folder of the MPS daemon of ``devices`` (``CUDA_VISIBLE_DEVICES`` entries) under ``base``: one per
    user, SLURM allocation (``SLURM_JOB_ID``; ``local`` outside one) and device set, short enough for the
    daemon's socket path (a hash of the devices)."""
    where = os.environ.get("SLURM_JOB_ID") or "local"
    digest = hashlib.sha1(",".join(devices).encode()).hexdigest()[:10]
    return Path(base) / f"mps-{os.getuid()}-{where}-{digest}"


def environment(folder: Path) -> dict[str, str]:
    """What the daemon of ``folder`` and its clients share: its pipe and log folders."""
    return {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An exclusive ``fcntl`` lock on ``path`` for the block: one job at a time starts or stops."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _in_use(folder: Path) -> bool:
    """Whether a running job holds the daemon of ``folder`` (a shared lock on its ``users`` file)."""
    fd = os.open(folder / "users", os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # any error, not only "busy" (job_start.locked_elsewhere): never quit a daemon unproven
        return True
    finally:
        os.close(fd)
    return False


def _control(folder: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``nvidia-cuda-mps-control`` with the daemon's folders and GPUs (the ``started`` file's)."""
    control = shutil.which(MPS_CONTROL)
    if control is None:
        raise MpsError(
            f"resources.mps: true, but {MPS_CONTROL} is not on PATH on {platform.node()}; install the "
            "NVIDIA driver's utilities there, or set resources.mps: false"
        )
    devices = (folder / "started").read_text().strip() if (folder / "started").exists() else ""
    env = {**os.environ, **environment(folder), "CUDA_VISIBLE_DEVICES": devices}
    return subprocess.run(
        [control, *args], input=stdin, env=env, capture_output=True, timeout=CONTROL_TIMEOUT_S
    )


def _start(folder: Path, devices: Sequence[str]) -> None:
    """Start the daemon of ``folder`` on ``devices``; a daemon a killed job left there is stopped first."""
    if (folder / "started").exists():
        _quit(folder)
    for sub in ("pipe", "log"):
        (folder / sub).mkdir(mode=0o700, exist_ok=True)
    (folder / "started").write_text(",".join(devices) + "\n")
    done = _control(folder, "-d")
    if done.returncode != 0:
        (folder / "started").unlink()
        said = " ".join((done.stderr or done.stdout or b"").decode(errors="replace").split())[-200:]
        raise MpsError(
            f"{MPS_CONTROL} -d failed on {platform.node()} (exit {done.returncode}: {said or 'no message'}; "
            f"its log: {folder / 'log'}); set resources.mps: false to train without MPS"
        )


def _quit(folder: Path) -> None:
    """``quit`` to the daemon of ``folder``; a daemon that is gone already, or a control program that
    fails, leaves nothing to stop (the allocation's end or the machine's next start does)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError, MpsError):
        _control(folder, stdin=b"quit\n")
    (folder / "started").unlink(missing_ok=True)


def join(devices: Sequence[str], base: str | os.PathLike, log: Any = None) -> dict[str, str]:
    """Use the MPS daemon of ``devices`` (the job's ``CUDA_VISIBLE_DEVICES`` entries; its folder under
    ``base``, :func:`daemon_folder`), starting it when no running job uses it, until this process ends
    (:func:`leave`). Sets this process's ``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_LOG_DIRECTORY`` and
    ``CUDA_VISIBLE_DEVICES`` (0 to n - 1: the daemon's numbering of the n devices) and returns them;
    call it before CUDA starts. One line to ``log`` says which daemon. Raises :class:`MpsError` (one
    line) where the daemon cannot start."""
    folder = daemon_folder(devices, base)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _exclusive(folder / "control"):
        started = not _in_use(folder)
        if started:
            _start(folder, devices)
        fd = os.open(folder / "users", os.O_RDONLY | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
    if not _JOINED:
        atexit.register(leave)
    _JOINED.append((folder, fd))
    env = environment(folder) | {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(len(devices))))}
    os.environ.update(env)
    if log is not None:
        what = "started" if started else "joined"
        print(f"contrastlab: MPS daemon {what}: {folder} (GPUs {', '.join(devices) or 'none'})", file=log)
    return env


def leave() -> None:
    """Stop using the daemons this process joined (:func:`join`); the last job of a daemon stops it
    (``quit``). Runs at exit; a second call does nothing."""
    while _JOINED:
        folder, fd = _JOINED.pop()
        with _exclusive(folder / "control"):
            os.close(fd)  # drops this job's shared lock
            if not _in_use(folder) and (folder / "started").exists():
                _quit(folder)
