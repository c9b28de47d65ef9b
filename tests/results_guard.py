"""The suite never touches the user's results: what lies under the checkout's ``results/`` and
``resources/`` is the same after the run as before it (tests/conftest.py checks it once per run, in the
controlling process; a run that changed anything fails, listing the files).

A file is its relative path, size and modification time (``os.lstat``: a link is itself, never followed).
Folders are not compared: a test that leaves an empty folder behind changes nothing a table reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

Snapshot = dict[str, tuple[int, int]]


def snapshot(roots: Iterable[str | os.PathLike], base: str | os.PathLike) -> Snapshot:
    """Every file under ``roots`` (absent ones are empty) as {path relative to ``base``: (size, mtime_ns)}."""
    found: Snapshot = {}
    for root in roots:
        for folder, _, files in os.walk(root):  # followlinks=False: a linked folder is not descended
            for name in files:
                path = Path(folder) / name
                try:
                    info = path.lstat()
                except FileNotFoundError:  # removed while walking (a run still writing): not there
                    continue
                found[os.path.relpath(path, base)] = (info.st_size, info.st_mtime_ns)
    return found


def changes(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> list[str]:
    """One line per file created, changed or deleted between two snapshots, sorted by path."""
    lines = []
    for path in sorted(set(before) | set(after)):
        if path not in before:
            lines.append(f"created {path}")
        elif path not in after:
            lines.append(f"deleted {path}")
        elif before[path] != after[path]:
            (size, mtime), (new_size, new_mtime) = before[path], after[path]
            lines.append(f"changed {path} (size {size} -> {new_size}, mtime_ns {mtime} -> {new_mtime})")
    return lines
