"""What the workflow tests and tests/e2e/test_{recovery,live_runs}.py share: a process's liveness, a
bounded wait, and a Snakemake lock file."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, timeout: float = 30, what: str = "the condition"):
    """``condition()``'s first true value, asked every 0.1 s for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)
    return value


def lock(lock_dir: Path, name: str, *paths: str) -> Path:
    """A Snakemake lock file ``lock_dir/name`` that lists ``paths``."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    (lock_dir / name).write_text("\n".join(paths) + "\n")
    return lock_dir / name
