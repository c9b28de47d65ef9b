"""A stand-in for ``nvidia-cuda-mps-control`` (contrastlab.workflow.mps) on a machine without NVIDIA's
driver: a shell script put first on ``PATH`` that starts nothing and records each call, one line a call
in a log file: what was asked (``start`` for ``-d``, else the command read from standard input, e.g.
``quit``), the daemon's pipe folder (``CUDA_MPS_PIPE_DIRECTORY``), its GPUs (``CUDA_VISIBLE_DEVICES``),
the SLURM allocation it ran in (``SLURM_JOB_ID``, empty outside one) and the time."""

from __future__ import annotations

import os
from pathlib import Path

SCRIPT = """#!/bin/sh
if [ "$1" = "-d" ]; then what=start; else read -r what; fi
echo "$what|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_VISIBLE_DEVICES|${SLURM_JOB_ID:-}|$(date +%s.%N)" >> "{log}"
"""


def install(folder: Path) -> tuple[Path, Path]:
    """The stand-in in ``folder/bin`` (put that first on ``PATH``) and its log ``folder/mps-calls.log``."""
    bin_dir, log = folder / "bin", folder / "mps-calls.log"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-cuda-mps-control"
    script.write_text(SCRIPT.replace("{log}", str(log)))
    script.chmod(0o755)
    return bin_dir, log


def path_with(bin_dir: Path) -> str:
    """``PATH`` with ``bin_dir`` first."""
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def calls(log: Path) -> list[dict[str, str | float]]:
    """The recorded calls, in order: ``what``, ``pipe``, ``devices``, ``slurm_job``, ``time``."""
    if not log.exists():
        return []
    keys = ("what", "pipe", "devices", "slurm_job", "time")
    rows = [dict(zip(keys, line.split("|"), strict=True)) for line in log.read_text().splitlines()]
    return [{**row, "time": float(row["time"])} for row in rows]
