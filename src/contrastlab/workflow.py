"""Helpers shared by the thin Snakemake scripts in ``scripts/``."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def job_label(snakemake: Any) -> str:
    """``rule train nie2023/bert-base/mpt/seed42``: the rule and its wildcards, for one-line errors."""
    found = getattr(snakemake, "wildcards", None)
    wildcards = dict(found.items()) if hasattr(found, "items") else {}  # Snakemake's Namedlist or a dict
    cell = "/".join(f"seed{v}" if k == "seed" else str(v) for k, v in wildcards.items())
    return f"rule {getattr(snakemake, 'rule', '?')}" + (f" {cell}" if cell else "")


#: Beside a cell's metrics file when its training or evaluation failed (see :func:`logged_to`).
FAILURE_RECORD = "failed.json"


def failure_record(snakemake: Any) -> Path | None:
    """``<results_dir>/metrics/<experiment>/<backbone>/<method>/seed<N>/failed.json`` of a cell's job
    (``None`` for jobs of no cell: data, backbones, Pretrained rows). Derived from the wildcards rather
    than passed as a param, since a new param would rerun every finished cell."""
    found = getattr(snakemake, "wildcards", None)
    wildcards = dict(found.items()) if hasattr(found, "items") else {}
    if not {"experiment", "backbone", "method", "seed"} <= set(wildcards):
        return None
    results = (getattr(snakemake, "config", None) or {}).get("results_dir", "results")
    w = wildcards
    return Path(
        results, "metrics", w["experiment"], w["backbone"], w["method"], f"seed{w['seed']}", FAILURE_RECORD
    )


def workflow_run(snakemake: Any) -> str | None:
    """``<pid>:<start time>`` of the Snakemake process that runs the job's workflow (the one
    :func:`record_running_workflow` recorded in ``<results_dir>/state/snakemake.json``), or ``None``.

    A job run by SLURM runs in another Snakemake process on another node; this names the submitting one,
    which stays the same across the retries of a job and changes with every new invocation."""
    results = (getattr(snakemake, "config", None) or {}).get("results_dir", "results")
    try:
        owner = json.loads(running_workflow_marker(results).read_text())
        return f"{owner['pid']}:{owner['start_time']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None


#: Failures that a retry of the same job reproduces: a non-finite loss (NonFiniteLossError is a
#: FloatingPointError), memory exhaustion raised as an exception (the trainer's MemoryError, torch's
#: OutOfMemoryError), and a bad setting (ValueError). Any other failure (a lost node, a broken GPU, an
#: I/O error) may pass on another node or later, so a retry is left to run.
DETERMINISTIC_FAILURES: tuple[type[BaseException], ...] = (FloatingPointError, MemoryError, ValueError)


def is_deterministic_failure(error: BaseException) -> bool:
    """Whether retrying the job would fail the same way (see :data:`DETERMINISTIC_FAILURES`)."""
    # torch.OutOfMemoryError (CUDA OOM) is a RuntimeError; matched by name so that torch is not imported.
    return isinstance(error, DETERMINISTIC_FAILURES) or any(
        cls.__name__ == "OutOfMemoryError" for cls in type(error).__mro__
    )


class GpuUnavailableError(RuntimeError):
    """A job that asked the scheduler for a GPU sees none (it would otherwise run on the CPU)."""


def requested_gpus(snakemake: Any) -> int:
    """GPUs the job asked for: its ``gpu`` resource, or the count of a ``gres`` such as ``gpu:1`` or
    ``gpu:a100:2`` (the ``profiles/slurm-gres`` form); 0 when it asked for none."""
    found = getattr(snakemake, "resources", None)
    resources = dict(found.items()) if hasattr(found, "items") else {}
    gpus = resources.get("gpu") or 0
    gpus = gpus if isinstance(gpus, int) else 0  # an unevaluated resource ("<TBD>") asks for nothing
    gres = str(resources.get("gres") or "")
    for item in filter(None, gres.split(",")):
        name, *rest = item.strip().split(":")
        if name == "gpu":
            count = rest[-1] if rest and rest[-1].isdigit() else "1"
            gpus = max(gpus, int(count))
    return gpus


def require_requested_gpu(snakemake: Any) -> None:
    """Raise :class:`GpuUnavailableError` when the job asked for a GPU (:func:`requested_gpus`) and torch
    sees none: on a node whose driver or CUDA is broken, the job would otherwise train for hours on the
    CPU. A job that asked for no GPU is left to run wherever it is."""
    wanted = requested_gpus(snakemake)
    if not wanted:
        return
    import torch

    if torch.cuda.is_available():
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise GpuUnavailableError(
        f"this job asked for {wanted} GPU(s) but torch sees none (torch.cuda.is_available() is False on "
        f"{platform.node()}; CUDA_VISIBLE_DEVICES={visible if visible is not None else 'unset'}, torch "
        f"{torch.__version__} built for CUDA {torch.version.cuda}); it would run on the CPU instead. Fix "
        "the node's driver/CUDA (or exclude the node), or run on the CPU on purpose with config "
        "resources.gpu: 0 (or --set-resources <rule>:gpu=0)"
    )


#: Lock files of the GPU slots (:func:`claim_gpus`): machine-wide, so that two Snakemake runs on one box
#: (two presets) share its GPUs too. ``CONTRASTLAB_GPU_LOCK_DIR`` replaces it.
GPU_LOCK_DIR = Path(tempfile.gettempdir()) / "contrastlab-gpu-slots"

#: The slots this process holds: the open lock files. The kernel releases an ``fcntl`` lock when its
#: process ends or dies (SIGKILL, out-of-memory kill), so a dead job never blocks a slot.
_HELD_SLOTS: list[Any] = []


def visible_gpus() -> list[str]:
    """The GPUs this process may use, without initialising CUDA: the entries of
    ``CUDA_VISIBLE_DEVICES`` when it is set, else one index per NVIDIA GPU the driver lists
    (``/proc/driver/nvidia/gpus``); ``[]`` on a machine without one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        return [str(i) for i in range(len(list(Path("/proc/driver/nvidia/gpus").iterdir())))]
    except OSError:
        return []


def claim_gpus(
    wanted: int,
    devices: list[str],
    lock_dir: str | os.PathLike | None = None,
    *,
    poll_seconds: float = 2.0,
    log: Any = None,
) -> list[str]:
    """Claim ``wanted`` of ``devices`` for this process: each under an exclusive ``fcntl`` lock on
    ``<lock_dir>/gpu-<device>.lock``, held until the process ends (or dies: the kernel drops the lock).
    Waits (polling) while every device is taken, printing one line to ``log`` once. With no more
    devices than wanted, they are all this job's (a scheduler such as SLURM chose them): no lock."""
    import fcntl

    if wanted <= 0 or len(devices) <= wanted:
        return list(devices)
    folder = Path(lock_dir or os.environ.get("CONTRASTLAB_GPU_LOCK_DIR") or GPU_LOCK_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # other users' jobs share the box's GPUs too
        folder.chmod(0o1777)
    claimed: list[str] = []
    said = False
    while True:
        for device in devices:
            if device in claimed:
                continue
            fd = os.open(folder / f"gpu-{device}.lock", os.O_RDONLY | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _HELD_SLOTS.append(fd)
            claimed.append(device)
            if len(claimed) == wanted:
                return claimed
        if not said and log is not None:
            print(
                f"contrastlab: all {len(devices)} GPUs ({', '.join(devices)}) are in use; waiting", file=log
            )
            said = True
        time.sleep(poll_seconds)


def job_device(snakemake: Any) -> str:
    """The device a training or evaluation job runs on, decided before torch touches CUDA: ``"cpu"``
    for a job that asked for no GPU (``resources.gpu: 0``; CUDA is then hidden from it), else
    ``"cuda"`` on GPUs of its own: :func:`claim_gpus` picks free ones of :func:`visible_gpus` and sets
    ``CUDA_VISIBLE_DEVICES`` to them, so that concurrent jobs of ``--resources gpu=N`` use N different
    GPUs. Raises :class:`GpuUnavailableError` when a GPU was asked for and torch sees none."""
    wanted = requested_gpus(snakemake)
    if not wanted:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return "cpu"
    devices = visible_gpus()
    if devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claim_gpus(wanted, devices, log=sys.stderr))
    require_requested_gpu(snakemake)
    return "cuda"


@contextlib.contextmanager
def training_job(snakemake: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """The frame of a training job's script: library output to the job's log, a failure as one line
    (and a failure record, :func:`logged_to`), the job's device (:func:`job_device`: its own GPU, never
    the CPU of a node whose GPU is broken, or the CPU with ``resources.gpu: 0``), torch's threads = the
    rule's; yields ``(device, the job's data locations)``."""
    stderr_to_log(snakemake.log[0])
    record = failure_record(snakemake)
    with logged_to(
        snakemake.log[0],
        job_label(snakemake),
        append=True,
        failure_record=record,
        run=workflow_run(snakemake),
    ):
        device = job_device(snakemake)  # before torch touches CUDA
        import torch

        torch.set_num_threads(max(1, snakemake.threads))
        yield device, job_data_locations(snakemake)


@contextlib.contextmanager
def evaluation_job(snakemake: Any) -> Iterator[str]:
    """The frame of an evaluation job's script (``encode``, ``evaluate``, ``evaluate_vision`` and the
    searches' twins): library output to the job's log, a failure as one line and a failure record
    (:func:`logged_to`), torch's threads = the rule's; yields the job's device (:func:`job_device`: its
    own GPU, or the CPU for a rule asking ``gpu=0``)."""
    record = failure_record(snakemake)
    with logged_to(
        snakemake.log[0], job_label(snakemake), failure_record=record, run=workflow_run(snakemake)
    ):
        device = job_device(snakemake)  # before torch touches CUDA
        import torch

        torch.set_num_threads(snakemake.threads)
        yield device


def job_data_locations(snakemake: Any) -> dict[str, str]:
    """:func:`contrastlab.data.acquire.data_locations` of the job's config. Jobs read where the data lie
    from the config rather than from a param, so that moving the data reruns no job (see data.smk)."""
    from contrastlab import config as cl_config
    from contrastlab.data.acquire import data_locations

    return data_locations(cl_config.validate(snakemake.config))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """Start time of ``pid`` (field 22 of /proc/<pid>/stat): a pid and its start time name one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def die_with_workflow(poll_seconds: float = 1.0) -> bool:
    """Make this job process exit when the Snakemake process that started it is gone.

    Snakemake starts a job's script as its child; if Snakemake is killed (SIGKILL, a closed terminal, an
    out-of-memory kill), the child would keep running as an orphan, holding a GPU and writing into a
    results folder the next run will use. A daemon thread polls the parent pid once a second (reading
    nothing else, so it costs nothing); when it changes, the job logs one line and exits with status 1.
    Only when the parent is a Snakemake process (a script run by hand is left alone); returns whether the
    watch started.
    """
    parent = os.getppid()
    if "snakemake" not in _cmdline(parent):
        return False

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        print(
            f"contrastlab: Snakemake (pid {parent}) is gone; stopping this job so that no orphan keeps "
            "running (the next run resumes it)",
            file=sys.__stderr__,
            flush=True,
        )
        os._exit(1)

    threading.Thread(target=watch, name="die-with-workflow", daemon=True).start()
    return True


def _lock_paths(lock_file: Path) -> list[str]:
    try:
        return lock_file.read_text().splitlines()
    except OSError:
        return []


def recover_killed_run(results_dir: str, workdir: str | os.PathLike = ".") -> str | None:
    """Clear what a killed run on ``results_dir`` left behind, so that the next plain run just resumes.

    The run that executes on ``results_dir`` records its pid and start time in
    ``<results_dir>/state/snakemake.json`` (:func:`record_running_workflow`) and removes it when it ends.
    If that file names a process that no longer exists, Snakemake was killed: its locks in
    ``.snakemake/locks`` that name files under ``results_dir`` are stale and are removed (Snakemake would
    otherwise refuse to start until ``--unlock``). Incomplete jobs are then rerun (``rerun-incomplete`` in
    the profiles) and finished cells are kept. Returns a one-line note of what was done, or ``None``. A
    run that is still alive is left alone, and Snakemake's own lock makes a second run on the same
    files refuse.
    """
    marker = running_workflow_marker(results_dir)
    try:
        owner = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if _start_time(owner["pid"]) == owner["start_time"]:
        return None  # still running
    removed = []
    root = os.path.normpath(results_dir)
    for lock_file in sorted(Path(workdir, ".snakemake", "locks").glob("*.lock")):
        if any(
            os.path.normpath(p) == root or os.path.normpath(p).startswith(root + os.sep)
            for p in _lock_paths(lock_file)
        ):
            lock_file.unlink(missing_ok=True)
            removed.append(lock_file.name)
    marker.unlink(missing_ok=True)
    return (
        f"contrastlab: the last run on {results_dir} (pid {owner['pid']}) was killed; removed its "
        f"{len(removed)} stale lock file(s), its incomplete jobs will be rerun"
    )


def running_workflow_marker(results_dir: str | os.PathLike) -> Path:
    """``<results_dir>/state/snakemake.json``: the pid and start time of the Snakemake run executing on
    ``results_dir`` (:func:`record_running_workflow`), absent when none is."""
    return Path(results_dir) / "state" / "snakemake.json"


def record_running_workflow(results_dir: str) -> None:
    """Record this Snakemake process as the one running on ``results_dir`` (see
    :func:`recover_killed_run`); called when the workflow starts executing, after it took its locks."""
    write_json(
        running_workflow_marker(results_dir),
        {"pid": os.getpid(), "start_time": _start_time(os.getpid()), "command": sys.argv},
    )


def forget_running_workflow(results_dir: str) -> None:
    """The run on ``results_dir`` ended (successfully or not) by itself: nothing to recover."""
    running_workflow_marker(results_dir).unlink(missing_ok=True)


def stderr_to_log(log_path: str | os.PathLike) -> None:
    """Send file descriptor 2 (C-level and library output: tqdm, torch warnings) to the job's log, and
    keep ``sys.stderr`` on the terminal for the one-line failure message :func:`logged_to` prints."""
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


@contextlib.contextmanager
def logged_to(
    log_path: str | os.PathLike,
    label: str = "",
    *,
    append: bool = False,
    failure_record: str | os.PathLike | None = None,
    run: str | None = None,
) -> Iterator[None]:
    """Send stdout/stderr of the block to ``log_path``; a failure ends the job with one line.

    The traceback goes to the log only; the real stderr gets ``contrastlab: <label>: <Error>: <message>
    (log: <path>)`` and the process exits with status 1 (``SystemExit``), so Snakemake shows that line
    and the log path instead of a traceback printed twice. ``label`` names the job (see
    :func:`job_label`): the cell, or the data step. ``failure_record``: a JSON file written on failure
    (job, error, log, whether a retry could help, ``run``) and removed when the job starts again, so the
    tables can show the cell as "failed" while a ``--keep-going`` run finishes the others.

    ``run`` names the Snakemake invocation (:func:`workflow_run`). When the record says that this job
    failed in the same invocation for a reason a retry reproduces (:func:`is_deterministic_failure`: NaN
    loss, out of memory, a bad setting), this attempt is Snakemake's retry (``retries:`` in the SLURM
    profile): it prints the same line and exits at once instead of repeating the failure for hours. A
    new invocation (the user changed something) runs the job again.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    if failure_record is not None:
        previous = _read_record(failure_record)
        if (
            run is not None
            and previous.get("run") == run
            and previous.get("job") == label
            and previous.get("retry_can_help") is False
        ):
            # Snakemake removed the failed attempt's log before this retry: put its traceback back.
            with open(log_path, "a") as log:
                log.write(previous.get("traceback", ""))
                print(f"contrastlab: not retried (a retry fails the same way): {previous['error']}", file=log)
            print(previous["error"], file=sys.stderr, flush=True)
            raise SystemExit(1)
        Path(failure_record).unlink(missing_ok=True)
    die_with_workflow()
    real_stderr = sys.stderr
    with open(log_path, "a" if append else "w", buffering=1) as log:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                yield
            except Exception as error:
                traceback.print_exc(file=log)
                where = f"{label}: " if label else ""
                message = " ".join(str(error).split())
                line = f"contrastlab: {where}{type(error).__name__}: {message} (log: {log_path})"
                print(line, file=real_stderr, flush=True)
                if failure_record is not None:
                    retry_can_help = not is_deterministic_failure(error)
                    record = {"job": label, "error": line, "log": str(log_path), "run": run}
                    record["traceback"] = traceback.format_exc()
                    write_json(failure_record, {**record, "retry_can_help": retry_can_help})
                raise SystemExit(1) from None


def _read_record(path: str | os.PathLike) -> dict[str, Any]:
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Write JSON atomically (tmp file + rename), so a killed job never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def evaluated_model(snakemake: Any) -> tuple[str, dict[str, Any] | None]:
    """The checkpoint an evaluation job (``encode``/``evaluate``, or a search's ``search_encode``/
    ``search_evaluate``) scores, and for a search the winner's record: its ``input.model``, else the
    winner named in ``input.selection`` (the search's last stage, contrastlab.search)."""
    if "selection" not in snakemake.input.keys():
        return str(snakemake.input.model), None
    selection = json.loads(Path(snakemake.input.selection).read_text(encoding="utf-8"))
    keys = ("winner", "winner_dev", "winner_settings", "winner_model", "metric", "stage")
    return selection["winner_model"], {key: selection[key] for key in keys}
