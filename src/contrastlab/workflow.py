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


def job_label(snakemake: Any) -> str:
    """``rule train nie2023/bert-base/mpt/seed42``: the rule and its wildcards, for one-line errors."""
    found = getattr(snakemake, "wildcards", None)
    wildcards = dict(found.items()) if hasattr(found, "items") else {}  # Snakemake's Namedlist or a dict
    cell = "/".join(f"seed{v}" if k == "seed" else str(v) for k, v in wildcards.items())
    return f"rule {getattr(snakemake, 'rule', '?')}" + (f" {cell}" if cell else "")


def job_data_locations(snakemake: Any) -> dict[str, str]:
    """:func:`contrastlab.data.acquire.data_locations` of the job's config. Jobs read where the data lie
    from the config rather than from a param, so that moving the data reruns no job (see data.smk)."""
    from contrastlab import config as cl_config
    from contrastlab.data.acquire import data_locations

    return data_locations(cl_config.validate(snakemake.config))


@contextlib.contextmanager
def logged_to(log_path: str | os.PathLike, label: str = "", *, append: bool = False) -> Iterator[None]:
    """Send stdout/stderr of the block to ``log_path``; a failure ends the job with one line.

    The traceback goes to the log only; the real stderr gets ``contrastlab: <label>: <Error>: <message>
    (log: <path>)`` and the process exits with status 1 (``SystemExit``), so Snakemake shows that line
    and the log path instead of a traceback printed twice. ``label`` names the job (see
    :func:`job_label`): the cell, or the data step.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    real_stderr = sys.stderr
    with open(log_path, "a" if append else "w", buffering=1) as log:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                yield
            except Exception as error:
                traceback.print_exc(file=log)
                where = f"{label}: " if label else ""
                message = " ".join(str(error).split())
                print(
                    f"contrastlab: {where}{type(error).__name__}: {message} (log: {log_path})",
                    file=real_stderr,
                    flush=True,
                )
                raise SystemExit(1) from None


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
