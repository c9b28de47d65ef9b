"""A killed Snakemake run and its jobs: the record of each run on a results folder, the invocation a job
belongs to, jobs that die with their workflow, and the recovery (stale locks, incomplete outputs) before a
plain rerun.

Each run that executes on a results folder writes its own record, ``<results_dir>/state/runs/<run>.json``:
its host, boot, PID namespace, pid and start time, and the sha256 of each lock file it holds in
``.snakemake/locks``. Recovery removes a lock only when the run that holds it is provably gone: a record
from this host, boot and PID namespace whose process no longer exists. A record from anywhere else (a
second login node on shared storage, a container) cannot be checked: it is named in one line and its
locks are left alone, so Snakemake's own lock refuses a second run on the same files.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contrastlab.artifacts import sha256_file
from contrastlab.paths import write_json

#: The environment variable naming the Snakemake invocation a job belongs to (set by the main process when
#: it starts executing; local jobs inherit it, and the SLURM plugin submits with ``--export=ALL``).
RUN_VARIABLE = "CONTRASTLAB_WORKFLOW_RUN"


def workflow_run(snakemake: Any = None) -> str | None:
    """``<host>:<pid>:<start time>`` of the Snakemake invocation that runs this job
    (:func:`record_running_workflow`), or ``None`` outside one.

    A job run by SLURM runs in another Snakemake process on another node; this names the submitting one,
    which stays the same across the retries of a job and changes with every new invocation."""
    return os.environ.get(RUN_VARIABLE) or None


def _read_first_line(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


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


def this_machine() -> dict[str, str]:
    """Where a pid means this process table: the host name, the kernel's boot id and the PID namespace.
    Two records with the same three see the same processes; a pid from any other is unknowable here."""
    return {
        "host": socket.gethostname(),
        "boot_id": _read_first_line("/proc/sys/kernel/random/boot_id"),
        "pid_namespace": _pid_namespace(),
    }


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


def runs_folder(results_dir: str | os.PathLike) -> Path:
    """``<results_dir>/state/runs``: one record per Snakemake run executing on ``results_dir``."""
    return Path(results_dir) / "state" / "runs"


def run_records(results_dir: str | os.PathLike) -> list[Path]:
    """The records of the runs that may be executing on ``results_dir`` (this contrastlab's, and the
    single marker an older one wrote): empty when none is."""
    legacy = _legacy_marker(results_dir)
    return sorted(runs_folder(results_dir).glob("*.json")) + ([legacy] if legacy.is_file() else [])


def _legacy_marker(results_dir: str | os.PathLike) -> Path:
    """The single marker of contrastlab before per-run records (one per folder, no host)."""
    return Path(results_dir) / "state" / "snakemake.json"


def _digest(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


def snakemake_lock_files(workflow: Any) -> list[str]:
    """The lock files this Snakemake process wrote in ``.snakemake/locks`` (its persistence's record of
    them; empty when it took none, e.g. ``--nolock``)."""
    return sorted(str(p) for p in getattr(getattr(workflow, "persistence", None), "_lockfile", {}).values())


def _record_path(results_dir: str | os.PathLike) -> Path:
    """This process's record on ``results_dir``: named by host, pid and start time, so that no two runs
    share one."""
    name = f"{socket.gethostname()}.{os.getpid()}.{_start_time(os.getpid())}"
    return runs_folder(results_dir) / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".json")


def record_running_workflow(
    results_dir: str | os.PathLike, lock_files: Iterable[str | os.PathLike] = ()
) -> Path:
    """Record this Snakemake process as a run executing on ``results_dir``: where it runs
    (:func:`this_machine`), its pid and start time, and the sha256 of each of its ``lock_files``. Called
    when the workflow starts executing, after it took its locks; also names the invocation for its jobs
    (:data:`RUN_VARIABLE`). Returns the record's path."""
    machine = this_machine()
    pid, start = os.getpid(), _start_time(os.getpid())
    record = _record_path(results_dir)
    locks = [d for d in (_digest(Path(p)) for p in lock_files) if d]
    write_json(record, {**machine, "pid": pid, "start_time": start, "command": sys.argv, "locks": locks})
    os.environ[RUN_VARIABLE] = f"{machine['host']}:{pid}:{start}"
    return record


def _records(results_dir: str | os.PathLike) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in run_records(results_dir):
        try:
            found.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            found.append((path, {}))  # unreadable: its owner cannot be checked
    return found


def _gone(record: Mapping[str, Any], machine: Mapping[str, str]) -> bool | None:
    """Whether the run of ``record`` has provably ended (``True``), is alive (``False``), or cannot be
    checked from here (``None``: another host, boot or PID namespace, or a record without them)."""
    if any(record.get(key) != value for key, value in machine.items()) or "pid" not in record:
        return None
    return _start_time(int(record["pid"])) != str(record.get("start_time"))


def _remove_locks(lock_dir: Path, digests: Iterable[str]) -> int:
    """Remove the lock files in ``lock_dir`` whose content has one of ``digests`` (each digest once):
    the dead run's own, found by content so that a lock another run wrote under a reused name stays."""
    wanted = list(digests)
    removed = 0
    for lock_file in sorted(lock_dir.glob("*.lock")):
        digest = _digest(lock_file)
        if digest in wanted:
            wanted.remove(digest)
            lock_file.unlink(missing_ok=True)
            removed += 1
    return removed


def _unknown_owner_line(results_dir: str, path: Path, record: Mapping[str, Any], here: str) -> str:
    if not record:
        who = f"an unreadable run record {path}"
    elif "host" not in record:
        who = f"a run recorded by an older contrastlab (pid {record.get('pid')}, {path})"
    else:
        where = record["host"] if record["host"] != here else f"{here} in another PID namespace or boot"
        who = f"a run on {where} (pid {record.get('pid')}, record {path})"
    return (
        f"contrastlab: {results_dir} may be in use by {who}, which cannot be checked from here; its locks "
        f"are left alone; if that run is gone, delete {path} and run this command once with --unlock"
    )


def recover_killed_run(results_dir: str, workdir: str | os.PathLike = ".") -> list[str]:
    """Clear what killed runs on ``results_dir`` left behind, so that the next plain run just resumes;
    returns one line per run found dead or unknowable (nothing for live runs on this machine).

    A record (:func:`record_running_workflow`) from this host, boot and PID namespace whose process no
    longer exists is a killed run: its own lock files in ``.snakemake/locks`` (found by their sha256) are
    removed, since Snakemake would otherwise refuse to start until ``--unlock``, and its record goes.
    Incomplete jobs are then rerun (``rerun-incomplete`` in the profiles) and finished cells are kept. A
    live run is left alone, and Snakemake's lock refuses a second run on its files. A record that cannot
    be checked (another host or namespace) is reported and its locks stay."""
    machine = this_machine()
    lock_dir = Path(workdir, ".snakemake", "locks")
    notes = []
    for path, record in _records(results_dir):
        gone = _gone(record, machine)
        if gone is None:
            notes.append(_unknown_owner_line(results_dir, path, record, machine["host"]))
        elif gone:
            removed = _remove_locks(lock_dir, record.get("locks", []))
            path.unlink(missing_ok=True)
            notes.append(
                f"contrastlab: a run on {results_dir} (pid {record['pid']}) was killed; removed its "
                f"{removed} stale lock file(s), its incomplete jobs will be rerun"
            )
    return notes


def forget_running_workflow(
    results_dir: str | os.PathLike,
    lock_files: Iterable[str | os.PathLike] = (),
    workdir: str | os.PathLike = ".",
) -> None:
    """This run on ``results_dir`` ended (successfully or not) by itself: remove its own record, and no
    other. ``lock_files``: this run's own (:func:`snakemake_lock_files`).

    Snakemake, as it unlocks at the end of a run, removes the whole ``.snakemake/locks`` folder, the
    locks of other runs still going on in the same working directory included. Those are read now and
    written back when this process exits (under a free name where theirs was retaken), so that a run
    ending never takes away another's locks."""
    _record_path(results_dir).unlink(missing_ok=True)
    own = {os.path.abspath(p) for p in lock_files}
    lock_dir = Path(workdir, ".snakemake", "locks")
    others = {}
    for lock_file in sorted(lock_dir.glob("*.lock")):
        if os.path.abspath(lock_file) not in own:
            try:
                others[lock_file.name] = lock_file.read_bytes()
            except OSError:
                continue
    if others:
        atexit.register(_restore_locks, lock_dir, others)


def _restore_locks(lock_dir: Path, locks: Mapping[str, bytes]) -> None:
    """Write back ``locks`` ({file name: content}) that are no longer in ``lock_dir``; a name another run
    took meanwhile gets the next free index of the same type (Snakemake reads every ``<n>.<type>.lock``)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    present = {_digest(p) for p in lock_dir.glob("*.lock")}
    for name, content in locks.items():
        if hashlib.sha256(content).hexdigest() in present:
            continue
        target, kind = lock_dir / name, name.split(".", 1)[1]
        index = 0
        while target.exists():
            target, index = lock_dir / f"{index}.{kind}", index + 1
        target.write_bytes(content)
