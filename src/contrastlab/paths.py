"""Where things live, and how they are written: the repository root, the optional ``shared`` folder beside
it, and the one atomic write (a temporary file or folder renamed over the target) every writer of the
package uses."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path | None:
    """The ``shared`` folder with real data and papers, or None when this clone has none.

    ``$CONTRASTLAB_SHARED`` wins; otherwise the folder ``shared`` beside the repository root.
    """
    env = os.environ.get("CONTRASTLAB_SHARED")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared"
    return candidate if (candidate / "data").is_dir() or (candidate / "papers").is_dir() else None


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` and rename it over ``path`` when the block ends without an
    exception, so that a killed job never leaves half a file; on an exception the temporary file is
    removed and ``path`` keeps its previous content. The temporary name is :func:`_partial`'s.
    ``fsync``: the data and the folder entry reach the disk before this returns
    (snapshots, which a power loss must not corrupt)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(path)
    try:
        yield tmp
        if fsync:
            _fsync(tmp)
        os.replace(tmp, path)
        if fsync:
            _fsync(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def _partial(path: Path) -> Path:
    """The temporary name of ``path`` while it is written: ``.<name>.<pid>.partial`` beside it (same folder,
    so the rename stays on one file system; the process's own, so concurrent writers never share it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """:func:`atomic_write` for a folder: yield a temporary path beside ``path`` (not created, so that
    ``shutil.copytree`` or ``save_pretrained`` may create it) and put it in the place of ``path`` (whose
    previous content is removed) when the block ends without an exception; on an exception the
    temporary folder is removed and ``path`` is left as it was. A killed job leaves either the previous
    folder or the new one, never half of one. ``fsync``: the folder entry reaches the disk before this
    returns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(path)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        if fsync:
            _fsync(path.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as indented, key-sorted JSON atomically (:func:`atomic_write`)."""
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")


@contextlib.contextmanager
def inter_process_lock(path: str | os.PathLike, *, timeout: float = -1) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if absent) across processes and machines, with the
    ``filelock`` library: an ``flock`` where the file system has one, else (Lustre mounted ``noflock``,
    some NFS: ``flock`` fails with ENOSYS) a soft lock, the lock file's existence, which ``filelock``
    removes on release (filelock 4 falls back by itself, with a warning; older ones raise, and the
    fallback is here). ``timeout``: seconds to wait (-1: forever)."""
    from filelock import FileLock, SoftFileLock

    try:
        lock = FileLock(path, timeout=timeout)
        lock.acquire()
    except (NotImplementedError, OSError):  # no flock on this file system
        lock = SoftFileLock(path, timeout=timeout)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
