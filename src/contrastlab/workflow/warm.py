"""Warm job starts: a local Snakemake job's script runs in a process forked from a *starter* that has
already imported torch, transformers, torchvision and scikit-learn, instead of in a fresh interpreter.

How. Every Snakemake script begins with ``hand_over(globals())``. The script's process (the *client*,
Snakemake's child) connects to the starter of its key (a Unix socket in a folder only this user can open)
and sends its argv, folder, environment, ``sys.path``, umask, limits, CPUs and cgroups as JSON and its
standard streams as descriptors; the starter forks, the fork runs the same script file, and the client
forwards its signals and ends as the fork ended. Where no starter serves yet, the client starts one and
waits while it imports (``CONTRASTLAB_WARM_WAIT`` seconds, default 60; 0 never waits). Where the starter
leaves or the wait runs out, the script runs in the client; where the starter refused, the key's jobs run
there at once. A starter exits once no job of its key (warm or cold: each holds a shared lock on
``<key>.running``) has run for ``CONTRASTLAB_WARM_IDLE`` seconds (default 120). Only a process that is
nothing but a Snakemake script hands itself over; a script run in-process with a stand-in runs in place.

What a job sees is what a fresh process would see: file, argv, folder, environment, paths, umask,
standard streams, default signal handlers, its own ``random`` state; what a fork inherits of its starter
instead is the starter's key, checked again before each job (:mod:`contrastlab.workflow.warm_key`).

Guarantees. No orphan: the client watches Snakemake as a cold job does
(:func:`~contrastlab.workflow.recovery.die_with_workflow`), the starter kills a fork whose client is gone,
and a fork dies with its starter (``PR_SET_PDEATHSIG``). Never under SLURM (``SLURM_JOB_ID`` set), never
in a job's own Apptainer container, never where the starter's imports loaded the CUDA driver (a fork
cannot use an inherited CUDA context: the starter refuses once and leaves ``<key>.refused`` for the key's
later jobs). Every job can tell how it started (:func:`contrastlab.workflow.job_start.start_record`).
Snakemake's ``benchmark:`` measures the client, so the fork writes its own peak memory and CPU seconds
beside it (:func:`record_usage`). ``CONTRASTLAB_WARM_START=0`` turns warm starts off; a setting in seconds
that is not a number is named in one line and its default used. Measurements: docs/measured.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from contrastlab.workflow.job_start import (
    STATE_VARIABLE,
    claim_start_record,
    cold_jobs_running,
    driver_initialised,
    locked_elsewhere,
    mark_running_cold,
    record_refusal,
    refusal,
    start_state,
)
from contrastlab.workflow.warm_key import (
    FORK_MARK,
    IDLE_VARIABLE,
    PRELOAD,
    WAIT_VARIABLE,
    cold_by_setting,
    inherited,
    seconds,
    setting_notes,
    socket_path,
)
from contrastlab.workflow.warm_key import SWITCH as SWITCH  # what turns warm starts off, named here too

#: Set by the Snakefile: each rule's benchmark file pattern (:func:`benchmark_patterns`).
BENCHMARKS_VARIABLE = "CONTRASTLAB_BENCHMARKS"
#: How long a starter just started may take to hold its lock before a waiting job takes it for gone.
STARTING_GRACE_SECONDS = 5.0
_HEADER = struct.Struct("!Q")
_PEER = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


def hand_over(script_globals: dict[str, Any], *, cli: bool = False) -> None:
    """Run the calling Snakemake script in a warm fork and end this process as the fork ended; return at
    once (the script runs here, as before) where warm starts are off, not possible, refused for this key
    (:func:`~contrastlab.workflow.job_start.refusal`), or no starter serves yet (one is then started in the
    background for the next jobs). The job's process, this one or the fork, learns which and why from
    :func:`~contrastlab.workflow.job_start.start_record`. A rule's script run by hand, with no
    ``snakemake`` object, stops with one line saying what to run instead, unless it has a command line of
    its own (``cli``)."""
    if not cli and "snakemake" not in script_globals and script_globals.get("__name__") == "__main__":
        script = Path(script_globals.get("__file__") or "this script").name
        sys.exit(
            f"contrastlab: {script} is a rule's script: Snakemake runs it with the job's inputs, params and "
            "outputs; run the workflow instead, e.g. .venv/bin/snakemake --configfile config/demo.yaml "
            "--cores 2 (`make help` lists the commands)"
        )
    if FORK_MARK in os.environ or not _is_script_process(script_globals):
        return  # a fork's record came with its request; another program's process is no job to mark
    why, waited = cold_by_setting(os.environ), 0.0
    address = None if why else socket_path(os.environ)
    if not why:
        why = refusal(address) if address else "no private folder for a starter's socket"
    if not why and address:
        connection, why, waited = _starter_connection(address)
        if connection is not None:
            start = start_state(warm=True, why_cold=None, waited_s=waited, pid=None)  # the fork claims it
            _send_job(connection, {STATE_VARIABLE: start})
            why = "starter took nothing over"  # _send_job returns only then
        mark_running_cold(address)
    os.environ[STATE_VARIABLE] = start_state(warm=False, why_cold=why, waited_s=waited, pid=os.getpid())


def _starter_connection(address: Path) -> tuple[socket.socket | None, str | None, float]:
    """A connection to ``address``'s starter (one started where none is, and waited for), else why none
    serves (a refusal it recorded, none yet, ...); and the seconds this took."""
    began, wait = time.monotonic(), seconds(os.environ, WAIT_VARIABLE)
    connection = _connect(address)
    if connection is None:
        if not _starter_importing(address):
            _start_starter(address)
        connection = _wait_for_starter(address, wait)
    waited = time.monotonic() - began
    if connection is not None:
        return connection, None, waited
    if wait <= 0:
        why = f"no starter yet ({WAIT_VARIABLE}=0)"
    else:
        why = f"no starter after waiting {wait:g} s" if waited >= wait else "starter left before serving"
    return None, refusal(address) or why, waited


#: The signals a client forwards to its fork, and that a fork sets as a fresh interpreter has them (SIGINT
#: first: Python's own handler).
_RESET_SIGNALS = tuple(
    getattr(signal, name) for name in "SIGINT SIGTERM SIGHUP SIGQUIT SIGUSR1 SIGUSR2".split()
)


def _send_job(connection: socket.socket, start: dict[str, str]) -> None:
    """Hand this job to the starter at the other end of ``connection``, its environment with ``start``
    (its start record) added, and end this process as the fork ends; returns only where the starter took
    nothing over (the script then runs here)."""
    request = {
        "argv": sys.argv,  # the file Python runs (Snakemake's copy, preamble first), not its __file__
        "orig_argv": sys.orig_argv,
        "inherited": inherited(),  # the starter runs nothing whose fork would have other limits, CPUs, ...
        "cwd": os.getcwd(),
        "env": {**os.environ, FORK_MARK: "1", **start},
        "path": sys.path,
        "umask": _umask(),
        # what this process was started ignoring (nohup: SIGHUP; a background job: SIGINT), as a fresh
        # interpreter inherits it
        "ignored": [int(n) for n in _RESET_SIGNALS if signal.getsignal(n) == signal.SIG_IGN],
    }
    try:
        payload = json.dumps(request).encode()
        socket.send_fds(connection, [_HEADER.pack(len(payload))], [0, 1, 2])
        connection.sendall(payload)
        fork = _HEADER.unpack(_receive(connection, _HEADER.size))[0]
    except (OSError, ValueError):
        fork = 0
    if fork == 0:
        connection.close()
        return
    _follow(connection, fork)


def _connect(address: Path) -> socket.socket | None:
    """A connection to the starter listening on ``address``, or ``None`` where none listens (yet)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(address))
    except OSError:
        connection.close()
        return None
    return connection


def _starter_importing(address: Path) -> bool:
    """Whether a starter holds ``address``'s lock (it takes it before its imports and keeps it while it
    serves). Probed with a shared lock taken and dropped at once: where none holds it, a starter started
    in that instant finds it taken and leaves, and the jobs run cold, as they would without a starter."""
    try:
        fd = os.open(f"{address}.lock", os.O_RDONLY)
    except OSError:
        return False
    return locked_elsewhere(fd, fcntl.LOCK_SH)


def _wait_for_starter(address: Path, seconds: float) -> socket.socket | None:
    """Connect to ``address`` once its starter listens: poll while a starter holds its lock (one that was
    just started gets :data:`STARTING_GRACE_SECONDS` to take it), for at most ``seconds``; ``None`` when
    none serves by then. A starter's imports take about as long as the job's own would, so the job loses
    no time by waiting and the machine does them once instead of once per job started meanwhile; Snakemake
    gone while the job waits ends it (:func:`~contrastlab.workflow.recovery.die_with_workflow`)."""
    if seconds <= 0:
        return None
    from contrastlab.workflow.recovery import die_with_workflow

    die_with_workflow()
    started = time.monotonic()
    while (waited := time.monotonic() - started) < seconds:
        time.sleep(0.1)
        connection = _connect(address)
        if connection is not None:
            return connection
        if refusal(address) or (waited > STARTING_GRACE_SECONDS and not _starter_importing(address)):
            return None  # it refused (the CUDA driver loaded) or left (an import failed): run cold
    return None


def _is_script_process(script_globals: dict[str, Any]) -> bool:
    """Whether the caller is the main program of its process and holds Snakemake's own ``snakemake``
    object (a :class:`snakemake.iocontainers.Snakemake`, unpickled by Snakemake's preamble): handing
    over ends the calling process, so a script run in-process or with a stand-in (a test's) runs in place."""
    containers = sys.modules.get("snakemake.iocontainers")
    main = sys.modules.get("__main__")
    return (
        containers is not None
        and isinstance(script_globals.get("snakemake"), containers.Snakemake)
        and main is not None
        and vars(main) is script_globals
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _start_starter(address: Path) -> None:
    """A starter for ``address``, in a session of its own so that a job's end or Ctrl-C never reaches it;
    one that finds another holding its lock exits at once. A setting of the environment that is not a
    number of seconds is named here, once per starter, not once per job."""
    for note in setting_notes(os.environ):
        print(note, file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if k != FORK_MARK}
    try:
        with open(address.with_suffix(".log"), "a") as log:
            subprocess.Popen(
                # in its own folder (0700, sockets and logs): nothing importable from a job's folder shadows
                # what it imports; not with -P, which its forks would keep (sys.flags, and in the command
                # line of a job's multiprocessing children)
                [sys.executable, "-m", "contrastlab.workflow.warm", str(address)],
                cwd=address.parent,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
    except OSError:
        pass  # no starter: every job starts cold, as before


def _receive(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the warm starter closed the connection")
        data += chunk
    return data


def _follow(connection: socket.socket, fork: int) -> None:
    """Wait for the fork running this job, passing on the signals this process gets, and exit as it
    exited (a fork killed by a signal: this process kills itself with it)."""
    from contrastlab.workflow.recovery import die_with_workflow

    for signum in _RESET_SIGNALS:
        signal.signal(signum, lambda signum, _frame: _kill(fork, signum))
    die_with_workflow()  # Snakemake gone: this process exits, the starter sees it and kills the fork
    try:
        status = _HEADER.unpack(_receive(connection, _HEADER.size))[0]
    except OSError:  # ConnectionError too: the starter closed before the status
        print("contrastlab: the warm starter ended before this job did; rerun the job", file=sys.stderr)
        os._exit(1)
    code = os.waitstatus_to_exitcode(int(status))
    _end_by_signal(code)
    os._exit(128 - code if code < 0 else code)


# --- the starter ----------------------------------------------------------------------------------------


def serve(address: Path, idle_seconds: float) -> str:
    """Import :data:`PRELOAD`, then fork one process per request on ``address`` until no job has run for
    ``idle_seconds``; returns why it stopped. Only one starter serves an address (a lock beside it)."""
    from filelock import FileLock, Timeout

    lock = FileLock(f"{address}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return "another starter serves this address"
    try:
        for module in PRELOAD:
            # an optional package not installed: its jobs import what they need themselves
            with contextlib.suppress(ImportError):
                __import__(module)
        refused = _cuda_refusal()
        if refused is not None:
            # with the lock held: the jobs waiting for this starter find the refusal when it goes
            reason, facts = refused
            record_refusal(address, reason, **facts)
            said = ", ".join(f"{k}: {v}" for k, v in facts.items())
            return f"{reason} ({said}): a fork could not use it; jobs start cold"
        if _cuda_driver_loaded():
            print(
                "the imports loaded the CUDA driver without initialising it: forks may use CUDA", flush=True
            )
        return _accept_jobs(address, idle_seconds)
    finally:
        lock.release()


def _cuda_driver_loaded() -> bool:
    try:
        return "libcuda.so" in Path("/proc/self/maps").read_text()
    except OSError:
        return True


def _cuda_refusal() -> tuple[str, dict[str, str]] | None:
    """Why this starter may not fork jobs, and the facts its refusal records (``driver_initialised``,
    ``torch_initialised``); None where it may. CUDA forbids a child to use a driver initialised before the
    ``fork``, but merely mapping ``libcuda.so.1`` (the CUDA 13 torch build loads it at import) initialises
    nothing. So the starter refuses where torch's lazy initialisation has run, or a loaded driver answers
    ``cuDeviceGetCount`` as initialised or cannot say; it asks only a driver already loaded."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    torch_initialised = bool(cuda is not None and cuda.is_initialized())
    initialised = driver_initialised() if _cuda_driver_loaded() else "not loaded"
    if not torch_initialised and initialised in ("no", "not loaded"):
        return None
    facts = {"driver_initialised": initialised, "torch_initialised": "yes" if torch_initialised else "no"}
    if torch_initialised or initialised == "yes":
        return "CUDA driver initialised by imports", facts
    return "CUDA driver loaded by imports, its initialisation unknown", facts


def _accept_jobs(address: Path, idle_seconds: float) -> str:
    staged = address.with_name(f"{address.name}.{os.getpid()}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(staged))
    listener.listen(64)
    os.replace(staged, address)  # clients only ever see a socket that is accepting
    own = address.stat().st_ino
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    forks: dict[int, socket.socket] = {}
    last_job = time.monotonic()
    served = 0
    try:
        # a stopped starter takes no new job but lets its running ones end (they die with it)
        while forks or (not stopping and time.monotonic() - last_job < idle_seconds):
            for key, _ in selector.select(timeout=0.2):
                if key.fileobj is listener:
                    connection, _ = listener.accept()
                    fork = 0 if stopping else _start_job(connection, [listener, selector, *forks.values()])
                    if fork:
                        served += 1
                        forks[fork] = connection
                        selector.register(connection, selectors.EVENT_READ, fork)
                    else:
                        connection.close()  # the client runs its script itself
                elif not _still_there(key.fileobj):  # the client was killed: so must its job be
                    selector.unregister(key.fileobj)
                    _kill(key.data)
            for fork, status in _reaped():
                connection = forks.pop(fork, None)
                if connection is not None:
                    if connection in selector.get_map():
                        selector.unregister(connection)
                    with contextlib.suppress(OSError):
                        connection.sendall(_HEADER.pack(status))
                    connection.close()
                last_job = time.monotonic()
            if not forks and time.monotonic() - last_job >= idle_seconds and cold_jobs_running(address):
                last_job = time.monotonic()  # its next job may come as soon as this one ends
    finally:
        with contextlib.suppress(OSError):
            if address.stat().st_ino == own:
                address.unlink()
        listener.close()
    return f"{served} jobs, then " + ("stopped" if stopping else f"no job for {idle_seconds:g} s")


def _still_there(connection: Any) -> bool:
    try:
        return bool(connection.recv(1))
    except OSError:
        return False


def _kill(fork: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(fork, signum)


def _reaped() -> list[tuple[int, int]]:
    done = []
    with contextlib.suppress(ChildProcessError):  # no child left
        while (reaped := os.waitpid(-1, os.WNOHANG))[0]:  # 0: none has ended yet
            done.append(reaped)
    return done


def _start_job(connection: socket.socket, starters: list[Any]) -> int:
    """Read one request and fork its job; the fork's pid (sent to the client), or 0 where the request
    could not be read (the client then runs its script itself). ``starters``: the starter's sockets and
    selector, which the fork closes."""
    connection.settimeout(10)
    _pid, uid, _gid = _PEER.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER.size))
    if uid != os.getuid():  # the folder is this user's alone; a peer of another user is refused all the same
        return 0
    try:
        header, fds, _flags, _address = socket.recv_fds(connection, _HEADER.size, 3)
        if len(header) != _HEADER.size or len(fds) != 3:
            raise ConnectionError("a request without its header and three descriptors")
        request = json.loads(_receive(connection, _HEADER.unpack(header)[0]))
    except (OSError, ValueError):  # ConnectionError is an OSError
        return 0
    if request.get("inherited") != inherited():  # moved since it started (taskset -p): its fork would be too
        for fd in fds:
            os.close(fd)
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    fork = os.fork()
    if fork == 0:
        for held in (*starters, connection):
            held.close()
        claim_start_record(request["env"])  # the start record its client sent names this fork
        os._exit(_run_job(request, fds))
    for fd in fds:
        os.close(fd)
    connection.settimeout(None)
    try:
        connection.sendall(_HEADER.pack(fork))
    except OSError:
        _kill(fork)
    return fork


def _run_job(request: dict[str, Any], fds: list[int]) -> int:
    """In the fork: become the client's process (streams, folder, environment, argv, paths, umask,
    signal handlers of a fresh interpreter), run its script, and return its exit status."""
    import atexit
    import builtins
    import types
    from importlib.machinery import SourceFileLoader

    _die_with_parent()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from the job's TMPDIR, should an import have asked the starter's
    sys.argv = list(request["argv"])
    sys.orig_argv = list(request["orig_argv"])
    sys.path[:] = request["path"]
    # the starter's own contrastlab (``-m contrastlab.workflow.warm``): the job imports its client's
    for name in [name for name in sys.modules if name.partition(".")[0] == "contrastlab"]:
        del sys.modules[name]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in _RESET_SIGNALS[1:]:
        signal.signal(signum, signal.SIG_DFL)
    for signum in request["ignored"]:
        signal.signal(signum, signal.SIG_IGN)
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        # as a fresh interpreter makes them (CPython's create_stdio): the starter's own streams were made
        # from the same environment; unbuffered output is the file itself, and no newline is translated
        former = getattr(sys, f"__{name}__")
        raw = unbuffered and fd != 0
        binary = open(fd, "rb" if fd == 0 else "wb", buffering=0 if raw else -1, closefd=False)
        (binary if raw else binary.raw).name = f"<{name}>"
        stream = io.TextIOWrapper(
            binary,
            encoding=former.encoding,
            errors=former.errors,
            newline="\n",
            line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    # ``python ../x/script.py`` names its file absolutely (joined to the folder, not normalised): its
    # ``__file__``, its code's file name and tracebacks
    path = os.path.join(os.getcwd(), sys.argv[0])
    script = types.ModuleType("__main__")  # as ``python script.py`` makes it, kept after a failure
    script.__file__, script.__builtins__, script.__annotations__ = path, builtins, {}
    script.__cached__, script.__loader__ = None, SourceFileLoader("__main__", path)
    sys.modules["__main__"] = script
    code = 0
    try:
        exec(compile(Path(path).read_bytes(), path, "exec"), script.__dict__)
    except SystemExit as stop:
        code = _exit_status(stop.code)
    except BaseException as failure:  # the script's own failure, printed as a fresh Python prints it
        failure.with_traceback(_from_script(failure.__traceback__, path))
        sys.excepthook(type(failure), failure, failure.__traceback__)
        # an interrupted Python ends killed by SIGINT, any other failure with status 1: so does the fork
        code = -signal.SIGINT if isinstance(failure, KeyboardInterrupt) else 1
    record_usage(getattr(script, "snakemake", None))
    atexit._run_exitfuncs()
    if code == 0:
        _close_summaries(getattr(script, "snakemake", None))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    _end_by_signal(code)
    return code


def _close_summaries(snakemake: Any) -> None:
    """A finished training job's summaries extended to this moment
    (:func:`contrastlab.workflow.job.close_summaries`, which its frame called already): the exit
    functions (logging's and TensorBoard's last flushes, the joins of worker threads) and the usage record
    then lie inside its phases, and only the fork's ``os._exit`` after them. Only where the job imported
    that frame (a training job's script): importing it here would cost a job of another rule its time."""
    job = sys.modules.get("contrastlab.workflow.job")
    if job is not None and snakemake is not None:
        # an OSError: the frame's close stands (its phases end a little earlier); the job succeeded
        with contextlib.suppress(OSError):
            job.close_summaries(snakemake)


def _end_by_signal(code: int) -> None:
    """For a negative exit code (``-signum``, as :func:`os.waitstatus_to_exitcode` gives it): end this
    process killed by that signal, as the job's process ended; nothing for an exit status."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)


def benchmark_patterns(rules: Any) -> str:
    """JSON of each rule's benchmark file pattern (Snakemake's ``workflow.rules``), for
    :data:`BENCHMARKS_VARIABLE`: a warm job records its own usage beside the file Snakemake will write."""
    from snakemake.io import strip_wildcard_constraints

    # without the constraints: the full config's enumerate every cell name, past an environment string's
    # size limit (128 kB), and the job's wildcards already met them
    return json.dumps(
        {rule.name: strip_wildcard_constraints(str(rule.benchmark)) for rule in rules if rule.benchmark}
    )


def record_usage(snakemake: Any) -> None:
    """Beside the job's benchmark file, the peak resident memory and CPU seconds of this fork (and of the
    processes it waited for), since Snakemake's benchmark measures the client
    (:func:`contrastlab.cost.measured.read_job_costs` reads both). In Snakemake's units: ``max_rss`` in MiB,
    the pages shared with the starter included (as a cold job's imports are in its peak); ``cpu_time`` in
    seconds from the hand-over on. Nothing where the job's rule has no benchmark file."""
    from snakemake.io import apply_wildcards

    from contrastlab.cost.measured import warm_usage_path

    patterns = json.loads(os.environ.get(BENCHMARKS_VARIABLE) or "{}")
    pattern = patterns.get(getattr(snakemake, "rule", None))
    if not pattern:
        return
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    usage = {
        "max_rss": max(own.ru_maxrss, waited.ru_maxrss) / 1024,  # kB on Linux; MB as Snakemake's column
        "cpu_time": own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime,
    }
    path = warm_usage_path(apply_wildcards(pattern, dict(snakemake.wildcards.items())))
    with contextlib.suppress(OSError):  # the cost table then shows what Snakemake measured
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(usage) + "\n")


def _from_script(trace: Any, script: str) -> Any:
    """``trace`` from the script's first frame on: this module's and runpy's frames are not the job's."""
    frame = trace
    while frame is not None and frame.tb_frame.f_code.co_filename != script:
        frame = frame.tb_next
    return frame or trace


def _exit_status(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _die_with_parent() -> None:
    """The kernel kills this fork when its starter dies (prctl PR_SET_PDEATHSIG): no job outlives it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)


if __name__ == "__main__":
    started = time.time()
    if not sys.flags.safe_path:  # -m put its own folder first; its forks get their clients' paths
        del sys.path[0]
    why = serve(Path(sys.argv[1]), seconds(os.environ, IDLE_VARIABLE))
    print(
        f"{time.strftime('%F %T')} starter {os.getpid()} ({time.time() - started:.0f} s): {why}", flush=True
    )
