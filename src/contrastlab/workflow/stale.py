"""Finished cells trained by other code than the checkout's: named on a dry run, never rerun for it.

A cell reruns when its settings, inputs or loss's code change (the profiles' rerun triggers), not when the
trainer or the evaluator do. The first record of each cell's ``train_log.jsonl`` holds the commit it was
trained at and whether the tree was dirty (:func:`contrastlab.provenance.run_metadata`), so a dry run
names the cells trained at another commit or from a dirty tree (:func:`stale_note`); what to retrain
stays the user's choice (``--forcerun`` or removing the cell's checkpoint folder).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from contrastlab.paths import CellLike, Results, cell_path

#: How many cells the note names before "and N more".
NAMED = 5


def trained_by_other_code(
    results: Results,
    cells: Iterable[CellLike],
    head: str | None,
    code_differs: Callable[[str], bool] = lambda sha: True,
) -> list[tuple[str, str]]:
    """(cell path, how) of each finished cell in ``cells`` whose training log's first record names another
    commit than ``head`` whose code differs (``code_differs(sha)``, asked once a commit: a commit that
    changed only the docs is the same code) ("at <sha7>"), or a dirty tree ("from a dirty tree at
    <sha7>"); cells without a log, or a log without the record, are left out (nothing to compare)."""
    found = []
    differs = functools.cache(code_differs)
    for cell in cells:
        try:
            with Path(results.checkpoint(cell, "train_log.jsonl")).open(encoding="utf-8") as log:
                meta = json.loads(log.readline()).get("meta") or {}
        except (OSError, ValueError, AttributeError):
            continue
        sha, dirty = meta.get("git_sha"), meta.get("git_dirty")
        if not sha:
            continue
        if head and sha != head and differs(sha):
            found.append((cell_path(cell), f"at {sha[:7]}{', dirty' if dirty else ''}"))
        elif dirty:
            found.append((cell_path(cell), f"from a dirty tree at {sha[:7]}"))
    return found


def stale_note(found: list[tuple[str, str]], head: str | None) -> str | None:
    """The dry run's one line naming the cells of :func:`trained_by_other_code` (None: there are none)."""
    if not found:
        return None
    named = ", ".join(f"{path} ({how})" for path, how in found[:NAMED])
    more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
    return (
        f"contrastlab note: {len(found)} finished cell(s) were trained by other code than this checkout's "
        f"({(head or 'unknown')[:7]}) and are kept, not rerun: {named}{more}; to retrain one, remove its "
        "checkpoints/<cell> folder (or run its train_log.jsonl as the target with --forcerun train)"
    )
