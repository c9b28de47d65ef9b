"""Resumable training state: atomic snapshots in a state folder outside the job's declared outputs.

Layout of ``state_dir``::

    state.pt               model, head, optimiser, scheduler, RNG states, step, best score, log offset
    state.json             a small readable summary of state.pt (step, best step, fingerprint)
    best-step00000125/     the best checkpoint so far (Hugging Face folder, no training head)
    log.jsonl              the live JSONL log (copied to the declared log path when training ends)

Every file is written to a temporary name and renamed, so a job killed at any moment leaves either the
previous snapshot or the new one. A best checkpoint folder is deleted only once a snapshot that no
longer refers to it has been written, so the snapshot and its best checkpoint always agree.

``state.pt`` holds tensors, state dicts and plain values only and is read with
``torch.load(..., weights_only=True)`` (:func:`read_snapshot`): nothing in a state folder, planted or
left by an older version, is unpickled into objects or run.
"""

from __future__ import annotations

import errno
import json
import pickle
import random
import re
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


def capture_rng(device: torch.device) -> dict[str, Any]:
    """Every RNG a training step on ``device`` draws from (torch's CPU generator and, on CUDA, ``device``'s
    own; numpy/python for completeness), as tensors and plain values only, so that the snapshot loads with
    ``weights_only=True`` (numpy's MT19937 key as an int64 tensor). Only ``device``'s CUDA generator is
    kept: other GPUs are no part of the run and would tie the snapshot to a machine with as many GPUs."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    numpy_state = (name, torch.from_numpy(key.astype(np.int64)), int(pos), int(has_gauss), float(gauss))
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    """Put back the RNG states of :func:`capture_rng` for a run on ``device``. A snapshot of an older
    version holds a list with every GPU's CUDA state: the one at ``device``'s index is restored, or the
    first where the list has none at that index."""
    random.setstate(state["python"])
    name, key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        saved = state["cuda"]
        if not isinstance(saved, torch.Tensor):  # an older version's list of every GPU's
            index = torch.cuda.current_device() if device.index is None else device.index
            saved = saved[index] if index < len(saved) else saved[0]
        torch.cuda.set_rng_state(saved, device)


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


class SnapshotUnreadableError(ValueError):
    """A ``state.pt`` that cannot be loaded safely: corrupted, or holding more than tensors and plain
    values (an older contrastlab's, or not contrastlab's). A ValueError: a retry of the job fails the
    same way (:func:`contrastlab.workflow.job.is_deterministic_failure`), only the user's fix helps."""


#: The object a snapshot refused by ``weights_only`` needed, in torch's message.
_UNSUPPORTED = re.compile(r"Unsupported (?:global|class): (?:GLOBAL )?([\w.]+)")


def read_snapshot(path: Path) -> dict[str, Any]:
    """The payload of the snapshot at ``path``, loaded with ``weights_only=True``: tensors, state dicts
    and plain values only, so that no object in the file is created and no code in it runs. A file
    that does not load that way, or is no snapshot, raises :class:`SnapshotUnreadableError` naming
    the file and the fix; an I/O error of the file system (other than torch's "invalid argument" for
    a damaged archive) is raised as it is, since a retry may pass."""
    fix = f"delete the cell's state folder {path.parent} to restart the cell"
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        needed = _UNSUPPORTED.search(str(error))
        if needed is None:
            raise SnapshotUnreadableError(_unreadable(path, error, fix)) from None
        raise SnapshotUnreadableError(
            f"the snapshot {path} holds more than tensors and plain values ({needed.group(1)}; written "
            f"by an older contrastlab, or not by contrastlab), so it was not loaded; {fix}"
        ) from None
    except MemoryError:
        raise
    except Exception as error:  # torch's reader: RuntimeError, EOFError, KeyError, ... on damaged bytes
        if isinstance(error, OSError) and error.errno not in (errno.EINVAL, None):
            raise
        raise SnapshotUnreadableError(_unreadable(path, error, fix)) from None
    if not isinstance(payload, dict):
        raise SnapshotUnreadableError(
            f"the snapshot {path} is no contrastlab snapshot (a {type(payload).__name__}); {fix}"
        )
    return payload


def _unreadable(path: Path, error: BaseException, fix: str) -> str:
    reason = (str(error).split(". ")[0].strip() or type(error).__name__)[:120]
    return f"the snapshot {path} cannot be read, truncated or corrupted ({reason}); {fix}"


def load_state(state_dir: Path, fingerprint: str) -> dict[str, Any] | None:
    """The saved payload if one exists for the same run (same ``fingerprint``), else None. The file is
    loaded safely (:func:`read_snapshot`) before anything in it, the fingerprint included, is read."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    payload = read_snapshot(path)
    return payload if payload.get("fingerprint") == fingerprint else None


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
