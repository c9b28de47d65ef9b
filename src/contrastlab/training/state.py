"""Resumable training state: atomic snapshots in a state folder outside the job's declared outputs.

Layout of ``state_dir``::

    state.pt               model, head, optimiser, scheduler, RNG states, step, best score, log offset
    state.json             a small readable summary of state.pt (step, best step, fingerprint)
    best-step00000125/     the best checkpoint so far (Hugging Face folder, no training head)
    log.jsonl              the live JSONL log (copied to the declared log path when training ends)

Every file is written to a temporary name and renamed, so a job killed at any moment leaves either the
previous snapshot or the new one. A best checkpoint folder is deleted only once a snapshot that no
longer refers to it has been written, so the snapshot and its best checkpoint always agree.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.paths import atomic_dir, atomic_write

STATE_FILE = "state.pt"
STATE_INFO = "state.json"
LOG_FILE = "log.jsonl"
BEST_PREFIX = "best-step"


def best_dir(state_dir: Path, step: int) -> Path:
    return state_dir / f"{BEST_PREFIX}{step:08d}"


def capture_rng() -> dict[str, Any]:
    """Every RNG the training step draws from (dropout uses torch's; numpy/python for completeness)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Call ``write(handle)`` on a temporary file and rename it to ``path``, fsynced
    (:func:`contrastlab.paths.atomic_write`): a failed write (disk full, I/O error) leaves the previous
    file as it was."""
    with atomic_write(path, fsync=True) as tmp, open(tmp, "wb") as handle:
        write(handle)


def save_state(state_dir: Path, payload: dict[str, Any], info: dict[str, Any]) -> None:
    """Write ``payload`` (torch-serialisable) and its readable ``info`` atomically."""
    atomic_write_bytes(state_dir / STATE_FILE, lambda handle: torch.save(payload, handle))
    text = json.dumps(info, indent=1, sort_keys=True).encode()
    atomic_write_bytes(state_dir / STATE_INFO, lambda handle: handle.write(text))


def load_state(state_dir: Path, fingerprint: str) -> dict[str, Any] | None:
    """The saved payload if one exists for the same run (same ``fingerprint``), else None."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("fingerprint") != fingerprint:
        return None
    return payload


def save_best(state_dir: Path, step: int, save: Any) -> Path:
    """Write a best checkpoint with ``save(folder)`` into ``best-step<step>`` atomically."""
    final = best_dir(state_dir, step)
    with atomic_dir(final, fsync=True) as tmp:
        save(tmp)
    return final


def prune_best(state_dir: Path, keep: set[int]) -> None:
    """Delete best checkpoint folders (and leftovers of interrupted writes) except those in ``keep``."""
    keep_names = {best_dir(state_dir, step).name for step in keep}
    for path in [*state_dir.glob(f"{BEST_PREFIX}*"), *state_dir.glob(f".{BEST_PREFIX}*.partial")]:
        if path.name not in keep_names:
            shutil.rmtree(path, ignore_errors=True)


def reset_state_dir(state_dir: Path) -> None:
    """Start from nothing: remove a previous run's snapshot, checkpoints and log."""
    if state_dir.exists():
        shutil.rmtree(state_dir)
    state_dir.mkdir(parents=True)


def truncate_log(state_dir: Path, offset: int) -> None:
    """Drop log lines written after the snapshot being resumed (they will be written again)."""
    path = state_dir / LOG_FILE
    if path.exists():
        with open(path, "r+b") as handle:
            handle.truncate(offset)
