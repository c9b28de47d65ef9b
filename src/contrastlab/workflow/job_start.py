"""How a job's process started: warm (a fork of a starter, :mod:`contrastlab.workflow.warm`) or cold, why
cold, when the process began and how long it waited for a starter (:func:`start_record`;
:mod:`contrastlab.workflow.job` writes it into the job's log as :func:`start_line`).

:func:`~contrastlab.workflow.warm.hand_over` writes the record into the job's environment
(:data:`STATE_VARIABLE`, JSON), so that it reaches a fork with the rest of the environment and reading it
needs no torch; a record names its process (``pid``), so a process the job starts does not claim it.
Beside a key's starter socket lie the marks of its cold jobs (:data:`RUNNING_SUFFIX`) and of a refusal
(:data:`REFUSED_SUFFIX`: the key's jobs then start cold at once)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from contrastlab.paths import read_json, write_json
from contrastlab.training.phases import process_started

#: Where :func:`~contrastlab.workflow.warm.hand_over` leaves the job's start record (JSON).
STATE_VARIABLE = "CONTRASTLAB_WARM_STATE"
#: Why a process that handed nothing over (a test's, a driver's, one started by a job) runs cold.
NOT_HANDED_OVER = "not a Snakemake script process"


def start_state(*, warm: bool, why_cold: str | None, waited_s: float, pid: int | None) -> str:
    """The start record hand_over decided now, as JSON for :data:`STATE_VARIABLE`: ``pid`` is the process
    that runs the job (``None`` for a fork not yet made: it claims it, :func:`claim_start_record`)."""
    record = {
        "warm": warm,
        "why_cold": why_cold,
        "process_started": process_started(),
        "handed_over": time.time(),
        "waited_s": round(waited_s, 3),
        "pid": pid,
    }
    return json.dumps(record)


def claim_start_record(env: MutableMapping[str, str]) -> None:
    """In a fork: make the record its client sent (unclaimed, ``pid`` ``None``) in ``env``, the job's
    environment, this process's own."""
    # nothing sent (a client older than this module): the record says "not a script process"
    with contextlib.suppress(KeyError, ValueError, TypeError):
        found = json.loads(env[STATE_VARIABLE])
        env[STATE_VARIABLE] = json.dumps({**found, "pid": os.getpid()})


def start_record() -> dict[str, Any]:
    """How this job's process started: ``warm`` (bool: a fork of a starter runs the job), ``why_cold``
    (str, a short fixed phrase, or None when warm), ``process_started`` (epoch seconds: when the job's
    process began, for a fork its client's start; where ``/proc`` cannot tell, when it was handed over),
    ``handed_over`` (epoch seconds when hand_over decided; None where it never ran in this process) and
    ``waited_s`` (seconds the job waited for a starter). A process that handed nothing over gets
    ``why_cold`` :data:`NOT_HANDED_OVER`."""
    try:
        found = json.loads(os.environ.get(STATE_VARIABLE) or "null")
        mine = isinstance(found, dict) and found.get("pid") == os.getpid()
    except ValueError:
        mine = False
    if not mine:
        found = {"warm": False, "why_cold": NOT_HANDED_OVER, "process_started": process_started()}
        found |= {"handed_over": None, "waited_s": 0.0}
    return {key: found[key] for key in ("warm", "why_cold", "process_started", "handed_over", "waited_s")}


def start_line(record: dict[str, Any] | None = None) -> str:
    """One line for the job's log: ``job start: warm (fork of a starter), 0.4 s after the process began``
    or ``job start: cold (<why>), 9.1 s after the process began``, with the seconds of it spent waiting
    for a starter where there were any. Not a ``contrastlab:`` line: the workflow takes a log's last one
    for the job's failure (:mod:`contrastlab.workflow.failures`)."""
    record = record or start_record()
    how = "warm (fork of a starter)" if record["warm"] else f"cold ({record['why_cold']})"
    line = f"job start: {how}, {time.time() - record['process_started']:.1f} s after the process began"
    if record["waited_s"] >= 0.05:
        line += f", {record['waited_s']:.1f} s of it waiting for the starter"
    return line


# --- beside a key's starter: what its jobs and its starter tell each other -----------------------------

#: Beside a starter's socket (``<key>.running``): every job of its key that runs cold holds a shared lock
#: on it, so the starter sees such a job as activity (:func:`cold_jobs_running`).
RUNNING_SUFFIX = ".running"
#: Beside a starter's socket (``<key>.refused``, JSON): why a starter of that key declined to serve (its
#: imports loaded the CUDA driver). The key's jobs then start cold at once, without starting a starter or
#: waiting for one; an install or another value of a variable imports read makes another key, tried anew.
REFUSED_SUFFIX = ".refused"


def refusal(address: Path) -> str | None:
    """``starter refused: <why>`` where a starter of ``address``'s key refused to serve, else ``None``."""
    found = read_json(address.with_suffix(REFUSED_SUFFIX))
    return f"starter refused: {found['reason']}" if "reason" in found else None


def driver_initialised() -> str:
    """Whether the CUDA driver this process loaded was also initialised (``cuInit`` called): ``"yes"``,
    ``"no"`` or ``"unknown ..."``, asked of ``cuDeviceGetCount``, which answers ``CUDA_ERROR_NOT_INITIALIZED``
    (3) before ``cuInit`` and initialises nothing. Recorded with a refusal: CUDA forbids only a fork after
    ``cuInit``."""
    import ctypes

    try:
        count = ctypes.c_int()
        result = ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count))
    except (OSError, AttributeError) as error:
        return f"unknown ({type(error).__name__})"
    return {0: "yes", 3: "no"}.get(result, f"unknown (CUresult {result})")


def record_refusal(address: Path, reason: str, **facts: str) -> None:
    """Remember beside ``address`` (:data:`REFUSED_SUFFIX`) that its starter refused, why, and ``facts``
    that may tell whether it could have served; written whole or not at all."""
    record = {"reason": reason, "starter": os.getpid(), **facts}
    with contextlib.suppress(OSError):  # not remembered: the key's next job starts a starter again
        write_json(address.with_suffix(REFUSED_SUFFIX), record)


def _open_running_mark(address: Path) -> int | None:
    try:
        return os.open(address.with_suffix(RUNNING_SUFFIX), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


def mark_running_cold(address: Path) -> None:
    """Hold a shared lock on ``address``'s :data:`RUNNING_SUFFIX` file until this process ends (the
    descriptor is never closed; the kernel drops the lock at exit, a SIGKILL too): its key's starter stays
    while this job runs cold. Never blocks."""
    fd = _open_running_mark(address)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # the starter's check holds it for an instant: it will find this job's next tick
        os.close(fd)


def cold_jobs_running(address: Path) -> bool:
    """Whether a job of ``address``'s key runs cold now (holds :func:`mark_running_cold`'s lock)."""
    fd = _open_running_mark(address)
    return fd is not None and locked_elsewhere(fd, fcntl.LOCK_EX)


def locked_elsewhere(fd: int, operation: int) -> bool:
    """Whether another process holds a lock on ``fd``'s file that ``operation`` (``LOCK_SH`` or
    ``LOCK_EX``, tried without blocking) conflicts with. Closes ``fd``, and with it any lock it took."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
