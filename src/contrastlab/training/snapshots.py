"""Snapshots off the training loop's critical path: the state is copied to host memory at the snapshot's
step, and a background thread writes it to disk while the next steps train.

Only the copy happens at the step, into host buffers kept from one snapshot to the next (page-locked on
CUDA, so the copies run asynchronously on the training stream); serialising, writing, ``fsync`` and the
rename are the writer thread's.

The guarantees of :mod:`contrastlab.training.state` hold: each file is written to a temporary name and
renamed, so a SIGKILL at any moment leaves the previous complete snapshot and the best checkpoint it
refers to. One write runs at a time: the next snapshot, the run's end or an error waits for it, and a
failed write (a full disk) raises there, in the training thread. The numbers written are a synchronous
write's, so a resumed run is bit-identical.

Where the environment sets :data:`MARKER_VARIABLE`, each submission leaves a marker in the state folder
(:func:`note_submitted`), on which ``make gpu-check`` kills its fp16 cell mid-write.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from contrastlab.paths import write_text

__all__ = ["MARKER", "MARKER_VARIABLE", "HostBuffers", "SnapshotWriter", "note_submitted"]

#: Set (to anything but empty) in a trainer's environment: it writes :data:`MARKER` at each submission.
MARKER_VARIABLE = "CONTRASTLAB_SNAPSHOT_MARKER"
#: The marker's name in the run's state folder (JSON: ``step``, ``on_disk``, ``pid``).
MARKER = "snapshot-submitted.json"


def note_submitted(state_dir: str | os.PathLike, step: int, on_disk: int) -> None:
    """Where :data:`MARKER_VARIABLE` is set, write :data:`MARKER` in ``state_dir``: the snapshot of
    ``step`` was just submitted and ``on_disk`` snapshots are complete (renamed into place). Written
    atomically (:func:`~contrastlab.paths.write_text`): a reader sees the whole marker or the previous one."""
    if not os.environ.get(MARKER_VARIABLE):
        return
    write_text(Path(state_dir, MARKER), json.dumps({"step": step, "on_disk": on_disk, "pid": os.getpid()}))


class HostBuffers:
    """Host copies of a nest of state dicts (dicts, lists, tuples; tensors anywhere) in buffers kept from one
    call to the next, so a snapshot allocates nothing after the first (buffers grow to the largest state
    seen). Device tensors go into page-locked buffers with asynchronous copies; :meth:`copy` returns the
    event (None on a CPU) the writer waits on before it reads them."""

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor | None] = []
        self._next = 0

    def copy(self, state: Any) -> tuple[Any, torch.cuda.Event | None]:
        """``state`` with every tensor replaced by its host copy, and the CUDA event after the last copy.
        The caller must not call :meth:`copy` again before the returned copy has been written (the
        buffers are reused): :class:`SnapshotWriter` waits for the write in flight first."""
        self._next = 0
        on_cuda: list[torch.device] = []
        copied = self._copy(state, on_cuda)
        if not on_cuda:
            return copied, None
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(on_cuda[0]))
        return copied, event

    def _copy(self, value: Any, on_cuda: list[torch.device]) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, on_cuda)
        if isinstance(value, dict):
            return {key: self._copy(item, on_cuda) for key, item in value.items()}
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(self._copy(item, on_cuda) for item in value)
        return copy.deepcopy(value)  # plain values (ints, floats, strings, the RNGs' tuples)

    def _tensor(self, tensor: torch.Tensor, on_cuda: list[torch.device]) -> torch.Tensor:
        tensor = tensor.detach()
        cuda = tensor.device.type == "cuda"
        if cuda and not on_cuda:
            on_cuda.append(tensor.device)
        index, self._next = self._next, self._next + 1
        if index == len(self._buffers):
            self._buffers.append(None)
        buffer = self._buffers[index]
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = self._buffers[index] = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=cuda)
        return buffer.copy_(tensor, non_blocking=cuda)


class SnapshotWriter:
    """Runs one snapshot's writes at a time in a background thread (:meth:`submit`); :meth:`wait` joins
    the write in flight and raises its exception, if it failed. ``background=False`` writes in the
    caller's thread (the same order of writes; for comparisons and benchmarks)."""

    def __init__(self, *, background: bool = True) -> None:
        self.background = background
        self.write_s = 0.0  # seconds spent writing, in the background or not
        self.writes = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[], None], ready: torch.cuda.Event | None = None) -> None:
        """Wait for the write in flight, then run ``write()`` (after ``ready``, the event of the host
        copies it reads) in the background."""
        self.wait()
        if not self.background:
            self._run(write, ready)
            self.wait()
            return
        # Not a daemon: an interpreter that exits lets the write finish (and the loop waits for it on an
        # error, for a warm-started job's os._exit); only a kill stops it, leaving the previous snapshot.
        self._thread = threading.Thread(
            target=self._run, args=(write, ready), name="contrastlab-snapshot", daemon=False
        )
        self._thread.start()

    def _run(self, write: Callable[[], None], ready: torch.cuda.Event | None) -> None:
        t = time.perf_counter()
        try:
            if ready is not None:
                ready.synchronize()
            write()
        except BaseException as error:  # re-raised in the training thread by wait()
            self._error = error
        finally:
            self.write_s += time.perf_counter() - t
            self.writes += 1

    def wait(self) -> None:
        """Block until no write is in flight; raise the exception of a write that failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
