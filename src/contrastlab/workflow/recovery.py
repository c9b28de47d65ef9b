"""A killed Snakemake run and its jobs: the running-workflow marker, the owner of a job's workflow, jobs that
die with their workflow, and the recovery (stale lock, incomplete outputs) before a plain rerun."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from contrastlab.paths import write_json


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
