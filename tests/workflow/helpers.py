"""What the workflow tests and tests/e2e/test_{recovery,live_runs,live_runs_one_folder}.py share: a
process's liveness, a bounded wait, a results folder under two names and a Snakemake lock file."""

from __future__ import annotations

import time
from pathlib import Path

from contrastlab.paths import write_text
from contrastlab.workflow.recovery import _start_time


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: neither gone nor a zombie (the recovery's own reading of /proc)."""
    return _start_time(pid) is not None


def wait_for(condition, timeout: float = 30, what: str = "the condition"):
    """``condition()``'s first true value, asked every 0.1 s for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)
    return value


def results_under_two_names(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp_path/results/a`` and ``results/b``, a symlink to it: one folder under two names."""
    real = tmp_path / "results" / "a"
    real.mkdir(parents=True)
    link = tmp_path / "results" / "b"
    link.symlink_to("a", target_is_directory=True)
    return real, link


def lock(lock_dir: Path, name: str, *paths: str) -> Path:
    """A Snakemake lock file ``lock_dir/name`` that lists ``paths``."""
    return write_text(lock_dir / name, "\n".join(paths) + "\n")
