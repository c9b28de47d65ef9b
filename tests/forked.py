"""A process of its own for a run a test SIGKILLs (the trainers' kill-and-resume tests), forked from one
server per pytest worker that imported torch, torchvision, transformers and the trainers once: a fresh
interpreter spends 5-12 CPU-seconds on those imports before the run's first step, and the suite kills a
dozen runs. The server is multiprocessing's ``forkserver`` (a fresh interpreter, never the threaded pytest
worker), so each run is a fork of a process that has imported but not yet computed anything."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

PRELOAD = [
    "torch",
    "torchvision",
    "transformers",
    "contrastlab.training.sentence",
    "contrastlab.training.vision",
    "contrastlab.training.events",
]


def start(code: str, argv: list[str], log: Path) -> multiprocessing.Process:
    """Run ``code`` as ``python -c code *argv`` would, its stdout and stderr appended to ``log``, in a
    forked process (started; ``kill()`` sends SIGKILL, ``exitcode`` is ``-9`` after one)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # read when the worker's server starts, its first run
    process = context.Process(target=_run, args=(code, argv, str(log)), daemon=True)
    process.start()
    return process


def run_script(script: Path, argv: list[str], log: Path) -> multiprocessing.Process:
    """:func:`start` for ``python script *argv`` (runpy puts ``script`` in ``sys.argv[0]``)."""
    return start(f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')", argv, log)


def _run(code: str, argv: list[str], log: str) -> None:
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for target in (1, 2):
        os.dup2(descriptor, target)
    os.close(descriptor)
    sys.argv = ["-c", *argv]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
