"""A killed Snakemake run and its jobs: the record of each run on a results folder, the invocation a job
belongs to, jobs that die with their workflow, and the recovery (stale locks, incomplete outputs) before a
plain rerun.

Each run writes ``<results_dir>/state/runs/<run>.json`` (host, boot, PID namespace, pid, start time, and
the sha256 of each lock it holds). Recovery removes a lock only when its run is provably gone: a record
from this host, boot and PID namespace whose process no longer exists. A record from anywhere else is
named in one line and its locks are left alone. A live record from this host refuses a second run on the
folder under any of its names (:func:`live_run_refusal`). The checkout lists its live runs too
(``.snakemake/contrastlab-runs/``), so that a run that ends gives back the locks of the runs still going
and only theirs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from contrastlab.artifacts import sha256_file
from contrastlab.paths import read_json, snakemake_record, write_json

#: The environment variable naming the Snakemake invocation a job belongs to (set by the main process when
#: it starts executing; local jobs inherit it, and the SLURM plugin submits with ``--export=ALL``).
RUN_VARIABLE = "CONTRASTLAB_WORKFLOW_RUN"


def workflow_run() -> str | None:
    """``<host>:<pid>:<start time>`` of the Snakemake invocation that runs this job
    (:func:`record_running_workflow`), or ``None`` outside one.

    A job run by SLURM runs in another Snakemake process on another node; this names the submitting one,
    which stays the same across the retries of a job and changes with every new invocation."""
    return os.environ.get(RUN_VARIABLE) or None


def _unless_gone(read: Callable[[], Any], default: Any) -> Any:
    """``read()``, or ``default`` where what it reads is gone or unreadable (an OSError)."""
    try:
        return read()
    except OSError:
        return default


def _start_time(pid: int) -> str | None:
    """Start time of ``pid`` (field 22 of /proc/<pid>/stat): a pid and its start time name one process.
    ``None`` for a zombie too: it has ended, and only its parent has not read its exit status yet."""
    try:
        state, *fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[18] if state != "Z" and len(fields) > 18 else None


def this_machine() -> dict[str, str]:
    """Where a pid means this process table: the host name, the kernel's boot id and the PID namespace.
    Two records with the same three see the same processes; a pid from any other is unknowable here."""
    return {
        "host": socket.gethostname(),
        "boot_id": _unless_gone(Path("/proc/sys/kernel/random/boot_id").read_text, "").strip(),
        "pid_namespace": _unless_gone(lambda: os.readlink("/proc/self/ns/pid"), ""),
    }


def die_with_workflow() -> bool:
    """Make this job process exit when the Snakemake process that started it is gone, so that no orphan keeps
    a GPU or writes into a results folder the next run will use: a daemon thread polls the parent pid once a
    second and, when it changes, logs one line and exits with status 1. Only where the parent is Snakemake
    (a script run by hand is left alone); returns whether the watch started."""
    parent = os.getppid()
    if b"snakemake" not in _unless_gone(Path(f"/proc/{parent}/cmdline").read_bytes, b""):
        return False

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
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
    single marker an older one wrote before per-run records, one per folder, no host): empty when none
    is."""
    legacy = Path(results_dir) / "state" / "snakemake.json"
    return sorted(runs_folder(results_dir).glob("*.json")) + ([legacy] if legacy.is_file() else [])


def _digest(path: Path) -> str | None:
    return _unless_gone(lambda: sha256_file(path), None)


def snakemake_lock_files(workflow: Any) -> list[str]:
    """The lock files this Snakemake process wrote in ``.snakemake/locks`` (its persistence's record of
    them; empty when it took none, e.g. ``--nolock``)."""
    return sorted(str(p) for p in getattr(getattr(workflow, "persistence", None), "_lockfile", {}).values())


def _run_id(record: Mapping[str, Any]) -> str:
    """``<host>:<pid>:<start time>`` of the run of ``record``: its jobs' :func:`workflow_run`."""
    return f"{record.get('host')}:{record.get('pid')}:{record.get('start_time')}"


def _record_path(results_dir: str | os.PathLike, run: str | None = None) -> Path:
    """The record on ``results_dir`` of ``run`` (:func:`_run_id`; this process by default): named by
    host, pid and start time, so that no two runs share one."""
    run = run or _run_id(_this_run(""))
    return runs_folder(results_dir) / (re.sub(r"[^A-Za-z0-9._-]", "_", run.replace(":", ".")) + ".json")


@contextlib.contextmanager
def slurm_job_noted(
    results_dir: str | os.PathLike, label: str, outputs: Iterable[str] = ()
) -> Iterator[None]:
    """Under SLURM, in a recorded run (:func:`workflow_run`): note this job's id beside its run's record
    (``<record>.slurm/<id>.<label's hash>.json``: a SLURM job may run a group of them) while it runs, for
    :func:`_slurm_refusal`, and once it ended, its ``outputs`` (:func:`_mark_unrecorded`). A job that SLURM
    starts after a rerun took its killed run over (the record gone) stops in one line. A local job in the
    allocation its run itself runs in (Snakemake inside ``sbatch`` or ``salloc``) dies with its run: not
    noted."""
    job, run = os.environ.get("SLURM_JOB_ID"), workflow_run()
    record = _record_path(results_dir, run) if job and run else None
    if record is None or read_json(record).get("slurm_job") == job:
        yield
        return
    note = record.with_suffix(".slurm") / f"{job}.{hashlib.sha256(label.encode()).hexdigest()[:16]}.json"
    with contextlib.suppress(OSError):  # not noted: a rerun cannot see this job
        write_json(note, {"job": label})
    try:
        if not record.is_file():
            raise SystemExit(
                f"contrastlab: {label}: the run that submitted SLURM job {job} ({run}) was killed and a "
                f"later run took over {results_dir}; this job stops so as not to train beside it"
            )
        yield
    except BaseException:
        note.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        write_json(note, {"job": label, "ended": list(outputs)})


def _mark_unrecorded(notes: Path, workdir: str | os.PathLike) -> int:
    """Mark incomplete again (``.snakemake/incomplete``) the outputs of each job in ``notes`` that ended
    (:func:`slurm_job_noted`) but has no Snakemake record: under SLURM the job clears its incomplete mark
    itself, a moment before the controller records it, so a controller killed in between would leave a
    finished cell that no later change of its settings reruns. Marked, the job runs again (a training job
    only re-exports its finished state) and is recorded. Returns the number of jobs marked."""
    snakemake_dir = Path(workdir, ".snakemake")
    marked = 0
    for note in sorted(notes.glob("*.json")):
        outputs, slurm_job = read_json(note).get("ended") or [], note.name.partition(".")[0]
        if all(snakemake_record(snakemake_dir / "metadata", key).is_file() for key in outputs):
            continue
        with contextlib.suppress(OSError):  # unwritable: Snakemake itself says so next
            for key in outputs:
                write_json(snakemake_record(snakemake_dir / "incomplete", key), {"external_jobid": slurm_job})
            marked += 1
    return marked


def _slurm_refusal(results_dir: str | os.PathLike, record_path: Path) -> str | None:
    """The line refusing a rerun while ``squeue`` lists a job the killed run of ``record_path`` noted
    (:func:`slurm_job_noted`), or cannot answer; ``None`` when none is listed."""
    notes = record_path.with_suffix(".slurm")
    running: dict[str, list[str]] = {}
    for path in sorted(notes.glob("*.json")):
        if "ended" not in (note := read_json(path)):
            running.setdefault(path.name.partition(".")[0], []).append(note.get("job", "?"))
    jobs = {job: ", ".join(labels) for job, labels in running.items()}
    if not jobs:
        return None
    ids = ",".join(jobs)
    try:
        asked = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", ids], capture_output=True, text=True, timeout=60
        )
        # squeue fails on ids it no longer knows (ended long ago): none of them runs
        failed = asked.returncode != 0 and "invalid job id" not in asked.stderr.lower()
        why = (asked.stderr.strip().splitlines() or [f"exit status {asked.returncode}"])[-1] if failed else ""
    except (OSError, subprocess.TimeoutExpired) as error:
        why = str(error)
    if why:
        return (
            f"contrastlab: a killed run on {results_dir} left SLURM job(s) {ids}, and squeue cannot say "
            f"whether they still run ({why}); once they have ended (squeue -j {ids}, or "
            f"scancel {ids.replace(',', ' ')}), delete {notes} and run this command again"
        )
    alive = [j for j in jobs if j in asked.stdout.split()]
    if not alive:
        return None
    named, it = ", ".join(f"{j}: {jobs[j]}" for j in alive), "them" if len(alive) > 1 else "it"
    return (
        f"contrastlab: {len(alive)} SLURM job(s) of a killed run on {results_dir} still queued or running "
        f"({named}); wait for {it} to end (squeue -j {','.join(alive)}) or cancel {it} (scancel "
        f"{' '.join(alive)}), then run this command again"
    )


def _checkout_list(workdir: str | os.PathLike) -> Path:
    """``<workdir>/.snakemake/contrastlab-runs``: one entry per run executing from ``workdir`` (whose
    ``.snakemake/locks`` it shares), naming that run's record."""
    return Path(workdir, ".snakemake", "contrastlab-runs")


def record_running_workflow(
    results_dir: str | os.PathLike,
    lock_files: Iterable[str | os.PathLike] = (),
    workdir: str | os.PathLike = ".",
) -> Path:
    """Record this Snakemake process as a run executing on ``results_dir``: where it runs
    (:func:`this_machine`), its pid and start time, its command and results folder, and the sha256 of each
    of its ``lock_files``; and list the record in ``workdir``'s :func:`_checkout_list`. Called when the
    workflow starts executing, after it took its locks; also names the invocation for its jobs
    (:data:`RUN_VARIABLE`). Returns the record's path."""
    run = _this_run(os.path.abspath(results_dir))
    record = _record_path(results_dir, _run_id(run))
    locks = [d for d in (_digest(Path(p)) for p in lock_files) if d]
    write_json(record, {**run, "locks": locks})
    write_json(_checkout_list(workdir) / record.name, {"record": os.path.abspath(record)})
    os.environ[RUN_VARIABLE] = _run_id(run)
    return record


def _this_run(results_dir: str) -> dict[str, Any]:
    """This process as a run on ``results_dir``: where it runs (:func:`this_machine`), its pid, start time
    and command."""
    pid = os.getpid()
    return {
        **this_machine(),
        "pid": pid,
        "start_time": _start_time(pid),
        "command": sys.argv,
        "results_dir": results_dir,
        "slurm_job": os.environ.get("SLURM_JOB_ID"),  # the allocation it runs in, if any
    }


def _records(results_dir: str | os.PathLike) -> list[tuple[Path, dict[str, Any]]]:
    # an unreadable record reads as {}: its owner cannot be checked
    return [(path, read_json(path)) for path in run_records(results_dir)]


def _gone(record: Mapping[str, Any], machine: Mapping[str, str]) -> bool | None:
    """Whether the run of ``record`` has provably ended (``True``), is alive (``False``), or cannot be
    checked from here (``None``: another host or PID namespace, or a record without them). A record of
    this host from another boot has ended: the host restarted since (:func:`_rebooted`)."""
    if "pid" not in record:
        return None
    if _rebooted(record, machine):
        return True
    if any(record.get(key) != value for key, value in machine.items()):
        return None
    return _start_time(int(record["pid"])) != str(record.get("start_time"))


def _rebooted(record: Mapping[str, Any], machine: Mapping[str, str]) -> bool:
    """Whether ``record`` was written on this host (its name) before the kernel last booted: both boot
    ids known, and different. No process of an earlier boot lives."""
    boot = record.get("boot_id")
    return (
        record.get("host") == machine["host"]
        and bool(boot and machine["boot_id"])
        and boot != machine["boot_id"]
    )


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
        where = record["host"] if record["host"] != here else f"{here} in another PID namespace"
        who = f"a run on {where} (pid {record.get('pid')}, record {path})"
    return (
        f"contrastlab: {results_dir} may be in use by {who}, which cannot be checked from here; its locks "
        f"are left alone; if that run is gone, delete {path} and run this command once with --unlock"
    )


def recover_killed_run(results_dir: str, workdir: str | os.PathLike = ".") -> list[str]:
    """Clear what killed runs on ``results_dir`` left behind, so that the next plain run just resumes;
    returns one line per run found dead or unknowable (nothing for live runs on this machine), and one for
    lock files that no live run claims.

    A killed run's own lock files (found by their sha256) and its record go, since Snakemake would otherwise
    refuse to start until ``--unlock``; its incomplete jobs rerun and finished cells are kept. A live run is
    left alone, and a record that cannot be checked is reported with its locks kept. Then the lock files no
    live run claims go (:func:`_unclaimed_locks`): those of runs that ended together, or were killed before
    they recorded themselves."""
    machine = this_machine()
    lock_dir = Path(workdir, ".snakemake", "locks")
    notes = []
    for path, record in _records(results_dir):
        gone = _gone(record, machine)
        if gone is None:
            notes.append(_unknown_owner_line(results_dir, path, record, machine["host"]))
        elif gone:
            if refusal := _slurm_refusal(results_dir, path):
                raise SystemExit(refusal)  # its record and locks stay: the next run asks again
            removed = _remove_locks(lock_dir, record.get("locks", []))
            unrecorded = _mark_unrecorded(path.with_suffix(".slurm"), workdir)
            path.unlink(missing_ok=True)
            shutil.rmtree(path.with_suffix(".slurm"), ignore_errors=True)
            (_checkout_list(workdir) / path.name).unlink(missing_ok=True)
            how = "ended when this host restarted (its record is of another boot)"
            also = f" (and {unrecorded} SLURM job(s) it did not record)" if unrecorded else ""
            notes.append(
                f"contrastlab: a run on {results_dir} (pid {record['pid']}) "
                f"{how if _rebooted(record, machine) else 'was killed'}; removed its {removed} stale lock "
                f"file(s), its incomplete jobs will be rerun{also}"
            )
    unclaimed = _unclaimed_locks(lock_dir, results_dir, workdir, machine)
    for lock_file in unclaimed:
        lock_file.unlink(missing_ok=True)
    if unclaimed:
        names = ", ".join(p.name for p in unclaimed[:6]) + (", ..." if len(unclaimed) > 6 else "")
        notes.append(
            f"contrastlab: removed {len(unclaimed)} lock file(s) in {lock_dir} that no live run claims "
            f"({names}: left by runs that ended or were killed together)"
        )
    return notes


def live_run_refusal(results_dir: str | os.PathLike) -> str | None:
    """The line that refuses a run on ``results_dir`` while another run of this host executes on it (a live
    record in its :func:`runs_folder` other than this process's); ``None`` when there is none. The records
    lie in the folder itself, so every name of it finds them, where Snakemake's lock compares path strings.
    It catches a run that holds no :func:`claim_results_folder` claim (an older contrastlab's)."""
    machine = this_machine()
    for _, record in _records(results_dir):
        if _gone(record, machine) is False and int(record["pid"]) != os.getpid():
            return _in_use_line(results_dir, record)
    return None


def _in_use_line(results_dir: str | os.PathLike, holder: Mapping[str, Any]) -> str:
    """The one line refusing a run on ``results_dir`` that ``holder`` (a run record, or a claim's
    content) executes on."""
    pid = holder["pid"]
    command = shlex.join(map(str, holder.get("command") or ["?"])).replace("\n", "\\n")
    command = command if len(command) <= 160 else command[:157] + "..."
    where = f" on {holder['results_dir']}" if holder.get("results_dir") else ""
    host, namespace, here = holder.get("host"), holder.get("pid_namespace"), this_machine()
    on = "this host" if host in (None, here["host"]) else host
    if namespace and namespace != here["pid_namespace"]:  # its pid means another process table
        on = f"{host} in another PID namespace"
    return (
        f"contrastlab: {results_dir} is in use by another run on {on} (pid {pid}, started as "
        f"`{command}`{where}); wait for it to end or stop it (kill {pid}), then run this command again"
    )


#: {the real path of a results folder: the open claim file this process holds its lock on}.
_CLAIMS: dict[str, int] = {}


def claim_path(results_dir: str | os.PathLike) -> Path:
    """``<the real path of results_dir>/state/runs/.claim``: the file whose lock is the claim on the
    folder, one file under every name of the folder."""
    return runs_folder(os.path.realpath(results_dir)) / ".claim"


def claim_results_folder(results_dir: str | os.PathLike) -> str | None:
    """Claim ``results_dir`` for this process's life, before the run reads or writes anything in it;
    returns ``None`` when this process holds the claim, else the one line refusing the run.

    The claim is an exclusive ``flock`` on :func:`claim_path` (the folder's real path, so every name of it
    locks the same file), taken and tested in one step: of two runs started in the same instant exactly one
    holds it, and the kernel releases it however the process ends, so no stale claim is left. The file names
    its holder for the refused run, and goes at exit with the folders made for it (a dry run leaves nothing).
    A folder where the file cannot be made or locked is not claimed: the run records
    (:func:`live_run_refusal`) still refuse a later run. Only the main Snakemake process calls it."""
    real = os.path.realpath(results_dir)
    if real in _CLAIMS:
        return None
    path = claim_path(results_dir)
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return _claimed_line(results_dir, path)
        except OSError:  # a file system without locks (ENOLCK): the run records are all there is
            os.close(fd)
            return None
        if _same_file(fd, path):
            break
        os.close(fd)  # its holder removed it as it ended, after this process opened it: take the new one
    _CLAIMS[real] = fd
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(_this_run(real)) + "\n").encode(), 0)
    atexit.register(_release_claim, real, path, made)
    return None


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path`` (not removed or replaced meanwhile)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _release_claim(real: str, path: Path, made: list[Path]) -> None:
    """At this process's exit: remove its claim file (while still holding it, so that no other run holds
    the removed file) and the empty folders made for it, then let the claim go."""
    fd = _CLAIMS.pop(real, None)
    if fd is None:
        return
    if _same_file(fd, path):
        path.unlink(missing_ok=True)
    for folder in made:  # innermost first
        try:
            folder.rmdir()
        except OSError:
            break  # not empty: the run wrote there
    os.close(fd)


def _claimed_line(results_dir: str | os.PathLike, path: Path) -> str:
    """The refusal of a run on ``results_dir``, whose claim file ``path`` another process holds."""
    holder = read_json(path)  # empty: its holder has not written itself in yet
    if "pid" in holder:
        return _in_use_line(results_dir, holder)
    return (
        f"contrastlab: {results_dir} is in use by another run starting on it this moment (it holds {path}); "
        "wait for it to end or stop it, then run this command again"
    )


def _checkout_records(workdir: str | os.PathLike) -> dict[Path, dict[str, Any]]:
    """{record path: record} of the runs :func:`_checkout_list` names, ended ones included (an unreadable
    entry or record is ``{}``). An entry whose record is gone (the run forgot itself, or was recovered) is
    removed."""
    found = {}
    for entry in sorted(_checkout_list(workdir).glob("*.json")):
        try:
            path = Path(json.loads(entry.read_text())["record"])
            record = json.loads(path.read_text())
        except FileNotFoundError:
            entry.unlink(missing_ok=True)
            continue
        except (OSError, ValueError, KeyError, TypeError):
            found[entry] = {}  # its owner cannot be checked
            continue
        found[path] = record if isinstance(record, dict) else {}
    return found


def _snakemake_processes(workdir: str | os.PathLike) -> set[int]:
    """The pids of the Snakemake processes (a main one, not a job's) other than this one that run in
    ``workdir`` on this host: those that may hold locks in its ``.snakemake/locks``."""
    here = os.path.realpath(workdir)
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if os.path.realpath(os.readlink(entry / "cwd")) != here:
                continue
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone, or another user's
        # `snakemake ...`, `python .../bin/snakemake ...` (its script) or `python -m snakemake ...`
        main = "snakemake" in map(os.path.basename, argv[:2]) or argv[1:3] == ["-m", "snakemake"]
        mode = argv[argv.index("--mode") + 1] if "--mode" in argv[:-1] else "default"
        if main and mode not in ("subprocess", "remote"):  # not a job that Snakemake started
            found.add(int(entry.name))
    return found


def _unclaimed_locks(
    lock_dir: Path, results_dir: str | os.PathLike, workdir: str | os.PathLike, machine: Mapping[str, str]
) -> list[Path]:
    """The lock files in ``lock_dir`` that no live run claims: none of the records of ``workdir``'s runs
    (:func:`_checkout_records`) or ``results_dir``'s that may be alive holds their sha256. None at all
    while such a record does not say which locks it holds (an older contrastlab's, an unreadable one), or
    while a Snakemake process runs in ``workdir`` that no record names: between taking its locks and
    recording itself (``onstart``), a run claims its locks in no record yet."""
    files = sorted(lock_dir.glob("*.lock"))
    if not files:
        return []
    records = [*_checkout_records(workdir).values(), *(r for _, r in _records(results_dir))]
    live = [r for r in records if not _gone(r, machine)]
    if any("locks" not in r for r in live):
        return []
    claimed = {digest for r in live for digest in r["locks"]}
    unclaimed = [p for p in files if _digest(p) not in claimed]
    recorded = {int(r["pid"]) for r in live if r.get("host") == machine["host"] and "pid" in r}
    if unclaimed and _snakemake_processes(workdir) - recorded:
        return []
    return unclaimed


def forget_running_workflow(
    results_dir: str | os.PathLike,
    lock_files: Iterable[str | os.PathLike] = (),
    workdir: str | os.PathLike = ".",
) -> None:
    """This run on ``results_dir`` ended by itself: remove its own lock files (``lock_files``), then its
    record and its entry in the checkout's list, and no other.

    Snakemake's unlock removes the whole ``.snakemake/locks`` folder, other live runs' locks included. Those
    are read now with the record claiming each (records first: a run that ends removes its locks before its
    record) and written back at exit where that record's run is still alive (:func:`_restore_locks`); the
    locks of a run that ended meanwhile are not, or two runs ending together would restore each other's."""
    own = {os.path.abspath(p) for p in lock_files}
    for path in own:  # Snakemake's unlock would, next: a run ending beside this one must not read them
        with contextlib.suppress(OSError):  # left to Snakemake's unlock, never read as another run's below
            Path(path).unlink(missing_ok=True)
    record = _record_path(results_dir)
    record.unlink(missing_ok=True)
    shutil.rmtree(record.with_suffix(".slurm"), ignore_errors=True)  # notes of its jobs SLURM killed
    (_checkout_list(workdir) / record.name).unlink(missing_ok=True)
    claims = {digest: path for path, r in _checkout_records(workdir).items() for digest in r.get("locks", [])}
    lock_dir = Path(workdir, ".snakemake", "locks")
    others, owners = {}, {}
    for lock_file in sorted(lock_dir.glob("*.lock")):
        if os.path.abspath(lock_file) in own:
            continue
        try:
            others[lock_file.name] = lock_file.read_bytes()
        except OSError:
            continue
        owners[lock_file.name] = claims.get(hashlib.sha256(others[lock_file.name]).hexdigest())
    if others:
        atexit.register(_restore_locks, lock_dir, others, owners)


def _still_running(record_path: Path, machine: Mapping[str, str]) -> bool:
    """Whether the run of the record at ``record_path`` may still execute: the record is there and its run
    has not provably ended (an unreadable one, or one from elsewhere, may)."""
    return record_path.is_file() and not _gone(read_json(record_path), machine)


def _restore_locks(lock_dir: Path, locks: Mapping[str, bytes], owners: Mapping[str, Path | None]) -> None:
    """Write back ``locks`` ({file name: content}) that are no longer in ``lock_dir`` and whose run may
    still execute: ``owners`` names the record that claimed each (:func:`_still_running`); a lock no
    record claimed (a run that had not recorded itself yet) is written back too. A name another run took
    meanwhile gets the next free index of the same type (Snakemake reads every ``<n>.<type>.lock``)."""
    machine = this_machine()
    wanted = {
        name: content
        for name, content in locks.items()
        if owners.get(name) is None or _still_running(Path(owners[name]), machine)
    }
    if not wanted:
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    present = {_digest(p) for p in lock_dir.glob("*.lock")}
    for name, content in wanted.items():
        if hashlib.sha256(content).hexdigest() in present:
            continue
        target, kind = lock_dir / name, name.split(".", 1)[1]
        index = 0
        while target.exists():
            target, index = lock_dir / f"{index}.{kind}", index + 1
        target.write_bytes(content)
