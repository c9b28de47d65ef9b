"""Helpers shared by the thin Snakemake scripts in ``scripts/``."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contrastlab.paths import REPO_ROOT


@contextlib.contextmanager
def logged_to(log_path: str | os.PathLike) -> Iterator[None]:
    """Send stdout/stderr of the block to ``log_path``; on failure also print the error's last line.

    Snakemake shows a failed job's log path; the one-line message printed to the real stderr tells the
    user what went wrong without opening it.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    real_stderr = sys.stderr
    with open(log_path, "w", buffering=1) as log:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                yield
            except BaseException as error:
                traceback.print_exc(file=log)
                print(f"contrastlab: {type(error).__name__}: {error} (log: {log_path})", file=real_stderr)
                raise


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def package_versions() -> dict[str, str]:
    """Versions of the packages whose behaviour changes the numbers."""
    from importlib import metadata

    versions = {}
    for name in ("contrastlab", "torch", "transformers", "tokenizers", "scikit-learn", "scipy", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def run_metadata() -> dict[str, Any]:
    """What produced a result: package versions, Python, git SHA (and a dirty flag), the command line."""
    status = _git("status", "--porcelain")
    return {
        "versions": package_versions(),
        "python": platform.python_version(),
        "git_sha": _git("rev-parse", "HEAD") or None,
        "git_dirty": None if status is None else bool(status),
        "command": sys.argv,
    }


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Write JSON atomically (tmp file + rename), so a killed job never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
