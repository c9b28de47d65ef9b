"""The artifacts lock: which bytes of every upstream input a reproduction used, so a second lab gets the same.

``artifacts.lock.json`` (the repository root by default; the config's ``artifacts_lock``) has two parts:

- ``data``: one entry per downloaded file, keyed by its name: ``sha256``, ``bytes``, the ``url`` and,
  for a Hugging Face hub file, the ``revision`` (commit) that URL resolved to;
- ``backbones``: one entry per Hugging Face repository: the ``revision`` and every file's sha256.

The first run writes every entry (trust on first use, after every publisher's check that exists:
CIFAR's md5, SentEval's per-file sha256, wiki1m's line count); every later run fetches the pinned
revisions and must find the pinned bytes. Commit the file to share the inputs byte for byte; deleting an
entry accepts new bytes. Writers hold a file lock (``filelock``, a soft lock where the file system has
no ``flock``) around each read-modify-write, as several jobs finish at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from contrastlab.paths import REPO_ROOT, atomic_write, inter_process_lock

#: The lock file's name (the schema's default ``artifacts_lock``: relative paths from the working directory),
#: and the repository's lock file by that name; an installed wheel with no checkout around it (no
#: Snakefile beside its site-packages) reads the one in the working directory, as the config does.
LOCK_NAME = "artifacts.lock.json"
LOCK_FILE = REPO_ROOT / LOCK_NAME if (REPO_ROOT / "Snakefile").is_file() else Path(LOCK_NAME)
FORMAT = 1
SECTIONS = ("data", "backbones")
CHUNK = 1 << 20
#: The background hash's block (:func:`hash_when_written`): large, since the thread takes the GIL back
#: after each block, waiting while the job's own thread holds it.
BACKGROUND_CHUNK = 32 << 20


def sha256_file(path: str | Path) -> str:
    """sha256 of a file (``hashlib.file_digest``: read in blocks, never whole)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What names one version of a file: its device and inode (a hard link or a rename keeps them), its
    size and its modification time."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


#: The digests of files this process wrote (:func:`hash_when_written`), by :func:`_identity`.
_WRITTEN: dict[tuple[int, int, int, int], Future] = {}
_WRITTEN_LOCK = threading.Lock()


def _hash_open_file(f: Any, future: Future) -> None:
    """Set ``future`` to the sha256 of the open file ``f``, or to None when the file changed while it
    was read (the digest is then of no version that stays on disk); close ``f``."""
    try:
        with f:
            before = _identity(os.fstat(f.fileno()))
            h, buffer = hashlib.sha256(), bytearray(BACKGROUND_CHUNK)
            view = memoryview(buffer)
            while read := f.readinto(buffer):
                h.update(view[:read])  # hashlib releases the GIL: the writer's thread goes on meanwhile
            future.set_result(h.hexdigest() if _identity(os.fstat(f.fileno())) == before else None)
    except BaseException as error:  # handed to the reader, who reads the file back
        future.set_exception(error)


def hash_when_written(path: str | Path) -> None:
    """Start the sha256 of ``path``, a file this process has just written and closed, in a background
    thread, so that the record of the job's finished work (:func:`recorded_sha256`) does not read it
    back after the export. The file is opened here, before this returns: a rename of its folder or the
    removal of its name (a state folder deleted after a hard-linked export) cannot make the thread miss
    it. Any failure of the thread only sends :func:`recorded_sha256` back to reading the file."""
    try:
        f = open(path, "rb")  # closed by the thread that reads it
    except OSError:
        return  # nothing remembered: the record reads the file back
    future: Future = Future()
    with _WRITTEN_LOCK:
        _WRITTEN[_identity(os.fstat(f.fileno()))] = future
    threading.Thread(target=_hash_open_file, args=(f, future), name="sha256", daemon=True).start()


def recorded_sha256(path: str | Path) -> str:
    """sha256 of ``path``: the one :func:`hash_when_written` computed while the job went on, when the file
    is still that version (same inode, size and modification time) and the hash succeeded; else the file
    read back (:func:`sha256_file`)."""
    with _WRITTEN_LOCK:
        future = _WRITTEN.pop(_identity(os.stat(path)), None)
    if future is not None:
        try:
            digest = future.result()
        except Exception:  # the hash while writing failed: read the file back
            digest = None
        if digest is not None:
            return digest
    return sha256_file(path)


class ChecksumError(RuntimeError):
    """A downloaded or existing file does not have the expected digest."""


class LockMismatch(ChecksumError):
    """An artifact's bytes or revision differ from its entry in the artifacts lock (or the lock itself
    cannot be read)."""


#: The fields every entry of a section has (what the readers index), and their types.
ENTRY_FIELDS = {"data": {"sha256": str, "bytes": int}, "backbones": {"revision": str, "files": dict}}


def read_lock(lock_file: str | Path) -> dict[str, Any]:
    """The whole lock (``{"format": 1, "data": {...}, "backbones": {...}}``; empty parts when absent). A
    file that is not JSON (cut short, edited by hand), not of the lock's shape, a folder or unreadable
    raises LockMismatch, one line naming it and the fix."""
    path = Path(lock_file)
    aside = "move it aside and run again to write one"
    if path.is_dir():
        raise LockMismatch(f"{path} is a folder, not an artifacts lock of format {FORMAT}; {aside}")
    try:
        lock = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LockMismatch(
            f"{path} is not readable JSON ({error}); restore it (`git checkout -- {path}` if you committed "
            "it), or move it aside and run again to pin every input anew"
        ) from None
    except OSError as error:
        raise LockMismatch(
            f"{path} cannot be read ({error.strerror}); make it readable, or {aside}"
        ) from None
    flaw = _shape_flaw(lock)
    if flaw is not None:
        detail = f" ({flaw})" if flaw else ""
        raise LockMismatch(f"{path} is not an artifacts lock of format {FORMAT}{detail}; {aside}")
    return {"format": FORMAT, **{section: dict(lock.get(section, {})) for section in SECTIONS}}


def _shape_flaw(lock: Any) -> str | None:
    """What keeps ``lock`` (parsed JSON) from being a lock of :data:`FORMAT` ("" when it is no object or of
    another format), or None: each section an object of entries, each entry with its fields' types."""
    if not isinstance(lock, dict) or lock.get("format", FORMAT) != FORMAT:
        return ""
    for section in SECTIONS:
        entries = lock.get(section, {})
        if not isinstance(entries, dict):
            return f"its {section!r} is not a mapping"
        for key, value in entries.items():
            if not isinstance(value, dict):
                return f"its {section} entry {key!r} is not a mapping"
            for field, kind in ENTRY_FIELDS[section].items():
                if not isinstance(value.get(field), kind) or isinstance(value.get(field), bool):
                    return f"its {section} entry {key!r} has no {field} of type {kind.__name__}"
    return None


def entry(lock_file: str | Path, section: str, key: str) -> dict[str, Any] | None:
    """The lock's entry ``key`` of ``section`` (``data`` or ``backbones``), or None."""
    found = read_lock(lock_file)[section].get(key)
    return dict(found) if found is not None else None


def record(lock_file: str | Path, section: str, key: str, value: Mapping[str, Any]) -> None:
    """Write ``value`` as the entry ``key`` of ``section``, keeping every other entry (held under a lock)."""
    if section not in SECTIONS:
        raise ValueError(f"unknown lock section {section!r}; expected one of {', '.join(SECTIONS)}")
    path = Path(lock_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    with inter_process_lock(path.with_name(path.name + ".lock"), timeout=600):
        lock = read_lock(path)
        lock[section][key] = dict(value)
        lock[section] = dict(sorted(lock[section].items()))
        with atomic_write(path) as tmp:
            tmp.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")


def mismatch(
    lock_file: str | Path, section: str, key: str, what: str, expected: str, found: str, *, where: str = ""
) -> LockMismatch:
    """The one-line error for ``key`` whose ``what`` (sha256, revision) is ``found`` where the lock pins
    ``expected``; says how to accept the new one."""
    place = f" ({where})" if where else ""
    return LockMismatch(
        f"{key}: {what} {found}{place} differs from the {what} {expected} pinned in {lock_file}; if the new "
        f'one is intended, delete the entry "{key}" from "{section}" in {lock_file} and run again'
    )


def pinned_backbone(
    lock_file: str | Path, repo_id: str, revision: str | None, *, where: str
) -> dict[str, Any] | None:
    """The lock's entry of the hub repository ``repo_id`` (None when not pinned yet), after checking that
    ``revision`` (the config's, None for ``main``; ``where`` names the setting) is the one it was pinned
    from or its commit: another revision raises LockMismatch, one line saying what to do."""
    pinned = entry(lock_file, "backbones", repo_id)
    asked = revision or "main"
    if pinned is not None and asked not in (pinned["revision"], pinned.get("requested")):
        expected = f"{pinned['revision']} (resolved from {pinned.get('requested')})"
        raise mismatch(lock_file, "backbones", repo_id, "revision", expected, asked, where=where)
    return pinned


def summary(lock_file: str | Path = LOCK_FILE) -> str:
    """One line per pinned input of ``lock_file`` (what ``make lock`` prints), or why there is none."""
    lock = read_lock(lock_file)
    lines = [
        f"{name}: sha256 {entry['sha256'][:16]}… ({entry['bytes']:,} bytes"
        + (f", commit {entry['revision'][:12]})" if entry.get("revision") else ")")
        for name, entry in lock["data"].items()
    ] + [
        f"{repo}: commit {entry['revision']} ({len(entry['files'])} files)"
        for repo, entry in lock["backbones"].items()
    ]
    if not lines:
        return f"{lock_file}: nothing pinned (this preset downloads nothing and fetches no hub backbone)"
    head = f"{lock_file} pins {len(lines)} inputs; commit it to share them byte for byte:"
    return "\n".join([head, *lines])


def package_model_dir(package: str) -> Path:
    """Folder of a Hugging Face model shipped inside an installed package (``<package>/model``).

    Here rather than in :mod:`contrastlab.models`, which imports torch: a model card names the package's
    licence without it (``make publish``, ``make cards``)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"package {package!r} is not installed; install it (`pip install {package.replace('_', '-')}`)"
        )
    folder = Path(next(iter(found.submodule_search_locations))) / "model"
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"package {package!r} has no model folder at {folder}")
    return folder


if __name__ == "__main__":
    import sys

    print(summary(sys.argv[1] if len(sys.argv) > 1 else LOCK_FILE))
