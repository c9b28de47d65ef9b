"""The last good tables and report survive a re-render that fails.

Snakemake deletes a job's outputs before the job runs, and again when it fails, so a re-render that
fails (a full disk, a bad metrics file) would leave no tables and no report at all. The Snakefile keeps
the set aside when the run starts (:func:`keep_previous`: hard links under
``<results_dir>/state/previous-report/``, so that it costs no space, readable there while the tables
job runs), puts it back when the run fails and left none of the set (:func:`restore_previous`), and
drops it when the run succeeds (:func:`forget_previous`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from contrastlab.paths import Results, atomic_dir, link_or_copy


def kept_dir(results_dir: str | os.PathLike) -> Path:
    """``<results_dir>/state/previous-report``: the previous set, under the paths it had in the results."""
    return Path(Results(results_dir).state("previous-report"))


def keep_previous(results_dir: str | os.PathLike, outputs: Sequence[str | os.PathLike]) -> str | None:
    """Keep the existing ``outputs`` of the tables job (the tables, ``report.md``, ``report.html``) aside,
    replacing the previous kept set, when the set on disk is whole: the HTML report is written last, so
    without it a render was cut short (killed) and the kept set, older but whole, stays. Returns a note
    when the set could not be kept (the run goes on: nothing is lost until the tables job runs)."""
    html = next((Path(p) for p in outputs if str(p).endswith(".html")), None)
    if html is None or not html.is_file():
        return None
    root = Path(results_dir)
    try:
        with atomic_dir(kept_dir(results_dir)) as tmp:
            for path in map(Path, outputs):
                if path.is_file():
                    target = tmp / path.relative_to(root)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(path, target)
    except (OSError, ValueError) as error:
        return f"contrastlab note: the previous tables and report could not be kept aside ({error})"
    return None


def restore_previous(results_dir: str | os.PathLike, outputs: Sequence[str | os.PathLike]) -> str | None:
    """After a failed run: when none of ``outputs`` exists (Snakemake removed them, the re-render
    failed), put the kept set back in place; returns a note saying so, or None."""
    kept = kept_dir(results_dir)
    if not kept.is_dir() or any(Path(p).exists() for p in outputs):
        return None
    files = sorted(p for p in kept.rglob("*") if p.is_file())
    for path in files:
        target = Path(results_dir, path.relative_to(kept))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    shutil.rmtree(kept, ignore_errors=True)
    return (
        f"contrastlab note: the tables and report were not re-rendered; the previous {len(files)} files are "
        "back in place"
    )


def forget_previous(results_dir: str | os.PathLike) -> None:
    """After a successful run: the kept set is no longer needed."""
    shutil.rmtree(kept_dir(results_dir), ignore_errors=True)
