"""Which warm starter may run a job (:mod:`contrastlab.workflow.warm`), and when none may: the starter's key,
what a job's process inherits from the starter it is forked from, and the settings that keep a job cold.

A fork keeps what the starter's process had, not its client's: the modules imported (and the environment
they read), resource limits, priorities, CPUs and control groups. So all of those are the key
(:func:`starter_key`: :data:`IMPORT_VARIABLES`, :data:`IMPORT_PREFIXES`, the interpreter and its packages,
:func:`inherited`), and a client whose own differ gets a starter of its own. The starter compares its
:func:`inherited` with the client's before each job too, so that one moved since it started (``taskset
-p``, a new cgroup) runs no job elsewhere than its client would: the job runs in its client, cold. What
the key does not hold (folder, environment, argv, ``sys.path``, umask, streams) the fork takes from its
client (:func:`contrastlab.workflow.warm._run_job`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import socket
import stat
import sys
import sysconfig
import tempfile
from pathlib import Path

SWITCH = "CONTRASTLAB_WARM_START"
IDLE_VARIABLE = "CONTRASTLAB_WARM_IDLE"
#: How long a job waits for a starter that is still importing before it runs cold (seconds; 0: never waits).
WAIT_VARIABLE = "CONTRASTLAB_WARM_WAIT"
#: Each setting in seconds: its default, and what it decides (for the line that names a bad value).
SECONDS = {
    WAIT_VARIABLE: (60.0, "a job waits {:g} s for a starting starter"),
    IDLE_VARIABLE: (120.0, "the warm starter waits {:g} s for a next job"),
}
#: Set in a fork's environment: the script it runs must not hand itself over again.
FORK_MARK = "CONTRASTLAB_WARM_FORK"
#: The variables a starter's imports may read (Python's own, the locale, thread pools, torch and CUDA, Hugging
#: Face, matplotlib, home, temporary and config folders): a starter serves only clients that agree on them,
#: ``PYTHONPATH`` compared by the folders it names, links resolved. The fork gets the client's whole
#: environment, so any other variable (``PATH``, proxies, a run's own ones, make's) is the job's own when the
#: job reads it; they stay out of the key so that one starter serves a whole session.
IMPORT_VARIABLES = ("HOME", "TMPDIR", "TEMP", "TMP", "TZ", "USER")
IMPORT_PREFIXES = tuple(
    """PYTHON LANG LC_ OMP_ MKL_ OPENBLAS_ GOTO_ VECLIB_ NUMEXPR_ KMP_ BLIS_ TORCH PYTORCH_ CUDA_ CUBLAS_
    CUDNN_ NCCL_ NVIDIA_ LD_ HF_ HUGGINGFACE_ TRANSFORMERS_ TOKENIZERS_ SAFETENSORS_ MPL SKLEARN_ SCIPY_
    NUMPY_ XDG_ SNAKEMAKE_""".split()
)
#: What the starter imports before it serves: what the training, encoding, evaluation and image jobs spend
#: their start on. contrastlab itself is never imported there, so a fork always runs the code on disk.
PRELOAD = tuple(
    """numpy pandas scipy.stats sklearn.linear_model matplotlib.pyplot torch torchvision transformers
    transformers.models.bert.modeling_bert safetensors.torch snakemake.script""".split()
)
#: The resource limits a fork inherits from its starter (``ulimit -v``, ``-n``, ...): part of the key.
LIMITS = tuple(f"RLIMIT_{name}" for name in "AS DATA RSS CPU FSIZE NOFILE STACK NPROC CORE MEMLOCK".split())
#: ``ioprio_get``'s system call number by machine (``os.uname().machine``); elsewhere the I/O priority is
#: left out of the key (an ``ionice``d client may then be served by a starter of another I/O class).
IOPRIO_GET = {"x86_64": 252, "aarch64": 31, "riscv64": 31, "ppc64le": 274, "i686": 290}


def seconds(env: dict[str, str] | os._Environ, name: str) -> float:
    """The setting ``name`` of :data:`SECONDS` in ``env``, in seconds (at least 0); its default where it is
    unset or not a number (:func:`setting_notes` names it)."""
    default, value = SECONDS[name][0], env.get(name)
    return default if value is None or _not_a_number(value) else max(0.0, float(value))


def setting_notes(env: dict[str, str] | os._Environ) -> list[str]:
    """One line for each setting of :data:`SECONDS` in ``env`` that is not a number of seconds: its name and
    value, the default used instead and the fix."""
    notes = []
    for name, (default, decides) in SECONDS.items():
        value = env.get(name)
        if value is not None and _not_a_number(value):
            notes.append(
                f"contrastlab note: {name}={value!r} is not a number of seconds; {decides.format(default)} "
                f"(set a number, e.g. {name}={default:g}, or unset it)"
            )
    return notes


def _not_a_number(value: str) -> bool:
    try:
        return math.isnan(float(value))
    except ValueError:
        return True


def cold_by_setting(env: dict[str, str] | os._Environ) -> str | None:
    """Why a job of environment ``env`` starts cold whatever starter serves (a short phrase for its start
    record), or ``None``."""
    if env.get(SWITCH, "1").strip().lower() in {"0", "false", "no", "off"}:
        return "warm starts off"
    if FORK_MARK in env:
        return "a warm fork already"
    if "SLURM_JOB_ID" in env:
        return "under SLURM"
    # a job in its own Apptainer container: a starter left from an earlier job's container would run this
    # one in that container's mounts
    if {"APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"} & set(env):
        return "in a container"
    if not (hasattr(socket, "send_fds") and hasattr(os, "fork") and sys.platform.startswith("linux")):
        return "no warm starts on this platform"
    return None


#: Hex digits of a starter's key (:func:`starter_key`), its socket's name.
KEY_DIGITS = 16


def socket_path(env: dict[str, str] | os._Environ) -> Path | None:
    """The starter's socket for this interpreter, its installed packages and ``env``: in
    ``<tmp>/contrastlab-warm-<uid>`` (``/tmp``'s where ``<tmp>`` is too deep for the 107 bytes of a socket's
    address), created 0700; ``None`` where that folder is another user's or open to others (a socket there
    could be someone else's, and it would receive this job's environment)."""
    folder = Path(tempfile.gettempdir()) / f"contrastlab-warm-{os.getuid()}"
    longest = f"{'0' * KEY_DIGITS}.sock.{2**22}"  # the starter binds <socket>.<pid> first
    if len(os.fsencode(folder / longest)) > 107:
        folder = Path("/tmp", folder.name)
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder / f"{starter_key(env)}.sock"


def starter_key(env: dict[str, str] | os._Environ) -> str:
    """What a starter's imports and its forks depend on: the interpreter, the installed packages
    (site-packages' change time moves with every install), the variables imports read
    (:data:`IMPORT_VARIABLES`, :data:`IMPORT_PREFIXES`) and what a fork inherits of this process
    (:func:`inherited`); 16 hex digits."""
    site = sysconfig.get_paths()["purelib"]
    try:
        installed = os.stat(site).st_mtime_ns
    except OSError:
        installed = 0
    kept = sorted(
        (k, _resolved_paths(v) if k == "PYTHONPATH" else v)
        for k, v in env.items()
        if (k in IMPORT_VARIABLES or k.startswith(IMPORT_PREFIXES)) and k != FORK_MARK
    )
    interpreter = [os.path.realpath(sys.executable), os.path.realpath(sys.prefix), os.path.realpath(site)]
    text = json.dumps([*interpreter, installed, list(PRELOAD), kept, inherited()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_DIGITS]


def inherited() -> dict[str, object]:
    """What a fork inherits of this process and a job's own process could have otherwise, as JSON values:
    the resource limits of :data:`LIMITS`, ``nice``, the scheduling policy, the I/O priority (``None``
    where unknown), the CPUs it may run on, its control groups and its out-of-memory score adjustment."""
    return {
        "limits": [
            list(resource.getrlimit(getattr(resource, name))) for name in LIMITS if hasattr(resource, name)
        ],
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "scheduler": os.sched_getscheduler(0),
        "io_priority": _io_priority(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "cgroup": _cgroup(),
        "oom_score_adj": _read("/proc/self/oom_score_adj"),
    }


def _cgroup() -> str:
    return _read("/proc/self/cgroup")


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _io_priority() -> int | None:
    """This process's I/O class and level as ``ioprio_get`` gives them (``ionice``; 0: none set)."""
    number = IOPRIO_GET.get(os.uname().machine)
    if number is None:
        return None
    import ctypes

    try:
        value = ctypes.CDLL(None, use_errno=True).syscall(number, 1, 0)  # 1 = IOPRIO_WHO_PROCESS, 0 = self
    except (OSError, AttributeError):
        return None
    return value if value >= 0 else None


def _resolved_paths(search_path: str) -> str:
    return os.pathsep.join(os.path.realpath(p) if p else p for p in search_path.split(os.pathsep))
