"""A process of its own for a run a test SIGKILLs (the trainers' kill-and-resume tests), forked from one
server per pytest worker that imported torch, torchvision, transformers and the trainers once: a fresh
interpreter spends 5-12 CPU-seconds on those imports before the run's first step, and the suite kills a
dozen runs. The server is multiprocessing's ``forkserver`` (a fresh interpreter, never the threaded pytest
worker), so each run is a fork of a process that has imported but not yet computed anything.

The same server runs the e2e tests' Snakemake (:func:`snakemake`, ``tests/e2e/conftest.py``'s
``snakemake_process``): a fresh ``python -m snakemake`` spends about 1.5 of its 2.5-3 CPU-seconds importing
Snakemake (its SLURM plugin's pandas and sqlmodel included) and the modules the Snakefile imports, and the
suite starts it about a hundred times. Runs a test kills or watches while they run stay real processes."""

from __future__ import annotations

import atexit
import importlib.util
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from contrastlab.paths import REPO_ROOT
from contrastlab.workflow.warm import _exit_status

#: What the Snakefile and rules/common.smk import from contrastlab when Snakemake reads them, each
#: ``from X import Y`` as both X and X.Y (the preload skips a name that is no module).
SNAKEFILE_IMPORTS = sorted(
    {
        name
        for text in (REPO_ROOT / "Snakefile", REPO_ROOT / "rules" / "common.smk")
        for module, member in re.findall(r"^\s*from (contrastlab[\w.]*) import (\w+)", text.read_text(), re.M)
        for name in (module, f"{module}.{member}")
    }
)

PRELOAD = [
    "torch",
    "torchvision",
    "transformers",
    "contrastlab.training.sentence",
    "contrastlab.training.vision",
    "contrastlab.training.events",
    "snakemake.cli",
    *SNAKEFILE_IMPORTS,
]


def start(code: str, argv: list[str], log: Path) -> multiprocessing.Process:
    """Run ``code`` as ``python -c code *argv`` would, its stdout and stderr appended to ``log``, in a
    forked process (started; ``kill()`` sends SIGKILL, ``exitcode`` is ``-9`` after one)."""
    process = _context().Process(target=_run, args=(code, argv, str(log)), daemon=True)
    process.start()
    return process


def _context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # read when the worker's server starts, its first run
    return context


def run_script(script: Path, argv: list[str], log: Path) -> multiprocessing.Process:
    """:func:`start` for ``python script *argv`` (runpy puts ``script`` in ``sys.argv[0]``)."""
    return start(f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')", argv, log)


def _write_to(path: str, flags: int, *fds: int) -> None:
    """Point the descriptors ``fds`` (1: stdout, 2: stderr) at the file ``path``, opened with ``flags``."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    for target in fds:
        os.dup2(descriptor, target)
    os.close(descriptor)


def _run(code: str, argv: list[str], log: str) -> None:
    _write_to(log, os.O_APPEND, 1, 2)
    sys.argv = ["-c", *argv]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})


def snakemake(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """``subprocess.run([python, "-m", "snakemake", *argv], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)``, run in a fork of the server: the folder, environment, ``sys.path`` and
    ``sys.argv`` of a fresh ``python -m snakemake``, its exit status, and its atexit functions run before
    it ends (the Snakefile's last line is printed by one)."""
    with tempfile.TemporaryDirectory(prefix="snakemake-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        path = [str(cwd), *_fresh_path(env)]
        process = _context().Process(target=_snakemake, args=(argv, str(cwd), env, path, str(out), str(err)))
        process.start()
        process.join(timeout)
        command = [sys.executable, "-m", "snakemake", *argv]
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(command, timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(command, process.exitcode, out.read_text(), err.read_text())


_FRESH_PATHS: dict[str | None, list[str]] = {}


def _fresh_path(env: dict[str, str]) -> list[str]:
    """``sys.path`` after its first entry (the folder, for ``-m``) in a fresh interpreter with ``env``'s
    PYTHONPATH; the server's own is the pytest worker's, with the entries pytest put in front."""
    key = env.get("PYTHONPATH")
    if key not in _FRESH_PATHS:
        listing = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"]
        _FRESH_PATHS[key] = json.loads(
            subprocess.run(listing, env=env, capture_output=True, check=True).stdout
        )
    return _FRESH_PATHS[key]


def _snakemake(argv: list[str], cwd: str, env: dict[str, str], path: list[str], out: str, err: str) -> None:
    _write_to(out, os.O_TRUNC, 1)
    _write_to(err, os.O_TRUNC, 2)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # found again from this run's TMPDIR
    sys.path[:] = path
    from snakemake.cli import main

    sys.argv = [importlib.util.find_spec("snakemake.__main__").origin, *argv]  # as ``-m snakemake`` sets it
    code = 0
    try:
        main()
    except SystemExit as stop:
        code = _exit_status(stop.code)  # the warm starter's forks end the same way
    except BaseException:  # printed as a fresh Python prints it; status 1
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
