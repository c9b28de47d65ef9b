"""Finished work checked before it is trusted: the size and sha256 of a cell's weights and metrics, recorded
when its job ends, and the check that the main Snakemake process makes of them before a run.

:func:`record_job` writes one record per finished output (a weights folder's ``*.safetensors`` or a
metrics file): ``<results_dir>/state/finished/<path under results_dir>.json``, each file's size, sha256
and modification time. Before a run, :func:`set_aside_changed` compares each trusted output with its
record (the size always, the sha256 where the file is small or its modification time moved); one that no
longer matches is named in one line and moved aside to ``<results_dir>/state/set-aside/``,
so that the run (a dry run too) makes it again with what depends on it. Rule ``all`` names every such
output, since Snakemake reruns no job for a missing file that only other jobs read.

An output without a record (an older contrastlab's) is trusted; one whose record cannot be read is
checked no more until its job runs again. A large file changed in place with its size and time kept is
not looked for: reading every checkpoint at every start would cost minutes on a full grid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from contrastlab.artifacts import recorded_sha256, sha256_file
from contrastlab.paths import read_json, snakemake_record, write_json
from contrastlab.workflow.failures import job_results_dir, snakemake_dict
from contrastlab.workflow.recovery import run_records

#: The outputs of a cell's job that later jobs trust, by their name in the rule's ``output:``.
RECORDED_OUTPUTS = ("model", "encoder", "metrics")

#: Files up to this size are digested at every check (a metrics file: microseconds); larger ones only when
#: their modification time moved.
ALWAYS_DIGESTED_BYTES = 1 << 20


def _relative(results_dir: str | os.PathLike, output: str | os.PathLike) -> str | None:
    """``output``'s path under ``results_dir`` (``/``-separated), or None when it lies elsewhere."""
    relative = Path(os.path.relpath(os.path.abspath(output), os.path.abspath(results_dir)))
    return None if relative.parts[:1] == ("..",) else relative.as_posix()


def record_path(results_dir: str | os.PathLike, output: str | os.PathLike) -> Path | None:
    """``<results_dir>/state/finished/<output under results_dir>.json``: the record of ``output``."""
    relative = _relative(results_dir, output)
    return None if relative is None else Path(results_dir, "state", "finished", relative + ".json")


def _entry(path: Path) -> dict[str, Any]:
    stat = path.stat()
    # the digest its writer took while the job went on (artifacts.hash_when_written), else read back
    return {"bytes": stat.st_size, "sha256": recorded_sha256(path), "mtime_ns": stat.st_mtime_ns}


def record_finished(results_dir: str | os.PathLike, outputs: Iterable[str | os.PathLike]) -> list[Path]:
    """Record the size, sha256 and modification time of each file of each of ``outputs`` that exists (a
    weights folder's ``*.safetensors``: the bytes later jobs trust); returns the records written. Called
    when the job that wrote them ends."""
    written = []
    for output in map(Path, outputs):
        record = record_path(results_dir, output)
        if record is None or not output.exists():
            continue
        trusted = sorted(output.rglob("*.safetensors")) if output.is_dir() else [output]
        files = {_relative(results_dir, path): _entry(path) for path in trusted if path.is_file()}
        write_json(record, {"output": _relative(results_dir, output), "files": files})
        written.append(record)
    return written


def record_job(snakemake: Any) -> list[Path]:
    """:func:`record_finished` for a cell's job as Snakemake hands it to its script: its outputs named in
    :data:`RECORDED_OUTPUTS` (the weights of ``train``, ``train_vision``; the metrics of ``evaluate`` and
    its twins), under the config's ``results_dir``. Nothing for a job with none of them."""
    named = snakemake_dict(snakemake, "output")
    outputs = [str(named[name]) for name in RECORDED_OUTPUTS if name in named]
    return record_finished(job_results_dir(snakemake), outputs) if outputs else []


def _mismatch(path: Path, want: dict[str, Any]) -> tuple[str | None, bool]:
    """``(why path no longer matches want, whether only its modification time moved)``."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return f"{path} is missing", False
    if stat.st_size != want.get("bytes"):
        return f"{path} is {stat.st_size:,} bytes, not the {want.get('bytes', 0):,} its job wrote", False
    moved = stat.st_mtime_ns != want.get("mtime_ns")
    if (moved or stat.st_size <= ALWAYS_DIGESTED_BYTES) and sha256_file(path) != want.get("sha256"):
        return f"{path} has the size its job wrote but not the same bytes (sha256)", False
    return None, moved


def changed(results_dir: str | os.PathLike, output: str | os.PathLike) -> str | None:
    """Why ``output`` no longer matches the record its job wrote, or None: it matches, it has no
    (readable) record, or it does not exist (Snakemake makes a missing output by itself). A match whose
    modification time moved (a copied results folder) updates the record, so the next check is cheap."""
    record = record_path(results_dir, output)
    found = read_json(record) if record is not None and Path(output).exists() else {}
    if not isinstance(found.get("files"), dict):
        return None
    moved_any = False
    for relative, want in found["files"].items():
        why, moved = _mismatch(Path(results_dir, relative), want if isinstance(want, dict) else {})
        if why is not None:
            return why
        moved_any |= moved
    if moved_any:
        record_finished(results_dir, [output])
    return None


def set_aside(results_dir: str | os.PathLike, output: str | os.PathLike) -> Path:
    """Move ``output`` to ``<results_dir>/state/set-aside/<its path under results_dir>`` (replacing an
    earlier one there) and forget its record; returns where it went."""
    relative = _relative(results_dir, output)
    if relative is None:
        raise ValueError(f"{output} is not under the results folder {results_dir}")
    target = Path(results_dir, "state", "set-aside", relative)
    if target.is_dir():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(output, target)
    record_path(results_dir, output).unlink(missing_ok=True)  # a path: output lies under results_dir
    return target


def _place(results_dir: str | os.PathLike, output: str | os.PathLike) -> str:
    """The cell (or ``pretrained/<backbone>``) an output belongs to: its path between the results
    folder's top folder (``checkpoints``, ``metrics``) and its own name."""
    parts = (_relative(results_dir, output) or "").split("/")
    return "/".join(parts[1:-1]) or str(output)


def set_aside_changed(results_dir: str | os.PathLike, outputs: Iterable[str | os.PathLike]) -> list[str]:
    """Check each of ``outputs`` (the finished work the workflow trusts: rule ``all`` names each) against
    its record (:func:`changed`); move each one that no longer matches aside (:func:`set_aside`), so
    that the run makes it again with what depends on it; returns one line per output found changed.
    While another run may be executing on ``results_dir``, nothing is moved: the lines say so."""
    found = [(output, why) for output in outputs if (why := changed(results_dir, output)) is not None]
    # a run record left after the recovery of killed runs, which this process has not written yet
    in_use = bool(found and run_records(results_dir))
    notes = []
    for output, why in found:
        cell = _place(results_dir, output)
        if in_use:
            notes.append(
                f"contrastlab: {cell}: {why}; left in place while another run may use {results_dir}: "
                f"once it has ended, run again to redo {cell}"
            )
            continue
        target = set_aside(results_dir, output)
        notes.append(
            f"contrastlab: {cell}: {why}; moved {output} aside to {target}: it is made again, with what "
            "depends on it"
        )
    return notes


def read_only_problem(outputs: Iterable[str | os.PathLike]) -> str | None:
    """The one line for the first of ``outputs`` (the finished work the workflow trusts) that is missing and
    whose folder (or the nearest existing one above it) cannot be written: the job that makes it would fail
    there. None when every missing output's folder can be written; a finished output in a read-only folder
    is only read, and fine."""
    for output in map(Path, outputs):
        if output.exists():
            continue
        folder = next((p for p in output.parents if p.exists()), Path("."))  # where the job makes it
        if folder.is_dir() and not os.access(folder, os.W_OK):
            return (
                f"{folder} cannot be written (read-only), and this run must write {output.name} there; make "
                f"it writable (chmod u+w {folder}, or remount it read-write) or set results_dir to a "
                "writable folder, then run the same command again"
            )
    return None


#: A training state folder's readable summary (contrastlab.training.state.STATE_INFO, not imported here:
#: the main process reads it without torch).
_STATE_INFO = "state.json"


def marked_incomplete(output: str | os.PathLike, workdir: str | os.PathLike = ".") -> bool:
    """Whether Snakemake marks ``output`` incomplete in ``<workdir>/.snakemake/incomplete``: its job was
    started and Snakemake has not recorded it as finished (a run killed between the job's end and that
    record leaves the mark, and the outputs exist)."""
    incomplete = Path(workdir, ".snakemake", "incomplete")
    if not incomplete.is_dir():
        return False
    # the spellings under which Snakemake may key it: its path as the rule wrote it, relative to the working
    # directory, or absolute where ``results_dir`` is
    given = os.fspath(output)
    absolute = os.path.abspath(os.path.join(workdir, given))
    keys = {given, os.path.normpath(given), absolute, os.path.relpath(absolute, os.path.abspath(workdir))}
    return any(snakemake_record(incomplete, key).is_file() for key in keys)


def forget_finished_states(
    cells: Iterable[tuple[str | os.PathLike, str | os.PathLike]],
    results_dir: str | os.PathLike | None = None,
    workdir: str | os.PathLike = ".",
) -> list[Path]:
    """Remove each ``(state_dir, output)`` pair's state folder that holds a finished cell whose ``output``
    Snakemake has accepted (it exists and ``workdir`` does not mark it incomplete,
    :func:`marked_incomplete`); returns those removed. Until then a training job keeps its finished state, so
    that a rerun after Snakemake failed or lost the job only re-exports. Called before a run (dry runs too)
    and when a run succeeds; nothing is removed while another run may be executing on ``results_dir``."""
    found = [
        Path(state)
        for state, output in cells
        if Path(output).exists()
        and read_json(Path(state, _STATE_INFO)).get("finished") is True
        and not marked_incomplete(output, workdir)
    ]
    if not found or (results_dir is not None and run_records(results_dir)):
        return []
    for state in found:
        shutil.rmtree(state, ignore_errors=True)
        with contextlib.suppress(OSError):  # and the folders it leaves empty, up to the first that is not
            os.removedirs(state.parent)
    return found
