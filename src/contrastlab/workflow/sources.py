"""The source files a rule names as inputs (the loss modules: editing one retrains the cells that use it),
spelled so that a moved or copied checkout plans nothing again.

Snakemake reruns a job whose recorded input paths differ from the ones it would use now, so a file inside
the working directory is named relative to it and one outside it (a user's loss in their own folder)
keeps its absolute path; the file's content still decides, through Snakemake's ``mtime`` trigger.
:func:`migrate_recorded_sources` rewrites the records of jobs that finished before this spelling, and a
backbone's folder when ``resources_dir`` has moved, so that the upgrade itself retrains nothing.
"""

from __future__ import annotations

import json
import os
import re
from base64 import urlsafe_b64decode
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from contrastlab.losses.user import module_path
from contrastlab.paths import REPO_ROOT, write_text

__all__ = [
    "LOCATION_KEYS",
    "loss_source",
    "missing_backbone_problem",
    "migrate_recorded_sources",
    "source_path",
    "with_locations",
    "without_locations",
]

#: The config's keys that say where things lie (and the data's, what they are: their identity is the data
#: rules' param), not what a result is: left out of a param that carries the config.
LOCATION_KEYS = ("data", "artifacts_lock", "resources_dir", "results_dir")

#: A built-in loss module in a recorded absolute path: its place inside a checkout, wherever that was.
_BUILTIN_LOSS = re.compile(r"/(src/contrastlab/losses/[A-Za-z0-9_]+\.py)$")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def source_path(
    path: str | os.PathLike, workdir: str | os.PathLike, basedir: str | os.PathLike, root=REPO_ROOT
) -> str:
    """``path`` as a rule input: relative to ``workdir`` (the folder Snakemake runs in) when it lies under
    it, else absolute. A file of the library (under ``root``, where contrastlab is imported from) is named
    through the workflow's own folder ``basedir`` when that holds the same file: a checkout whose ``src/``
    is reached through a link, or a virtual environment that imports the library from the checkout by its
    resolved path, still gives ``src/contrastlab/...``. No symlink is resolved otherwise (a resolved path
    can leave the working directory)."""
    path = os.path.abspath(path)
    workdir = os.path.abspath(workdir)
    root = os.path.abspath(root)
    if _under(path, root) and not _under(path, workdir):
        through = os.path.join(os.path.abspath(basedir), os.path.relpath(path, root))
        if os.path.exists(through) and os.path.samefile(through, path):
            path = through
    return os.path.relpath(path, workdir) if _under(path, workdir) else path


def loss_source(name: str, workdir: str | os.PathLike, basedir: str | os.PathLike, root=REPO_ROOT) -> str:
    """The file that defines loss ``name`` (built in or the user's), as :func:`source_path` spells it."""
    return source_path(Path(root) / module_path(name), workdir, basedir, root)


def without_locations(config: Mapping) -> dict:
    """``config`` as a rule's param (a figure drawn from the whole config): every setting, no location, so
    that a moved resources or results folder redraws nothing while a changed setting redraws."""
    return {key: value for key, value in config.items() if key not in LOCATION_KEYS}


def with_locations(settings: Mapping, config: Mapping) -> dict:
    """The whole config again from :func:`without_locations`'s ``settings`` and the job's ``config`` (its
    locations: where this run's folders lie now)."""
    return {**{key: config[key] for key in LOCATION_KEYS if key in config}, **settings}


def _migrated(recorded: str, workdir: str, basedir: str, root, backbones: Mapping[str, str]) -> str:
    """Today's spelling of a recorded input: a backbone's folder (``<resources>/models/<alias>``) is
    ``backbones[alias]``; an absolute ``.py`` input (a loss module, the only Python files rules name as
    inputs) is :func:`source_path`'s: a built-in loss module of any checkout (one copied from, or moved
    since) is this checkout's at the same place, a user's file is the same file. Anything else is left as
    recorded."""
    parent, alias = os.path.split(recorded)
    if alias in backbones and os.path.basename(parent) == "models":
        return backbones[alias]
    if not os.path.isabs(recorded) or not recorded.endswith(".py"):
        return recorded
    builtin = _BUILTIN_LOSS.search(recorded)
    if builtin and (Path(root) / builtin.group(1)).is_file():  # this checkout's, wherever the old one is
        return source_path(Path(root) / builtin.group(1), workdir, basedir, root)
    if os.path.exists(recorded):
        return source_path(recorded, workdir, basedir, root)
    return recorded


def _recorded_output(record: Path, folder: Path) -> str | None:
    """The output a Snakemake record is of: its name under ``folder``, urlsafe base64 of the path, cut
    into ``@``-prefixed folders when longer than a file name (snakemake.persistence.file)."""
    try:
        return urlsafe_b64decode(
            "".join(p.removeprefix("@") for p in record.relative_to(folder).parts)
        ).decode()
    except ValueError:  # binascii.Error, UnicodeDecodeError
        return None


def migrate_recorded_sources(
    metadata_dir: str | os.PathLike,
    workdir: str | os.PathLike,
    basedir: str | os.PathLike,
    root=REPO_ROOT,
    *,
    results: str | os.PathLike | None = None,
    backbones: Mapping[str, str] | None = None,
) -> int:
    """Rewrite the places recorded in Snakemake's job records (``.snakemake/metadata``) that name the same
    thing as today's: absolute loss-module inputs into :func:`source_path`'s spelling, and, for outputs under
    ``results``, a backbone's folder in another resources folder into this run's ``backbones[alias]``.
    Returns how many records changed; running it again changes nothing, and a record it cannot read is left
    alone. Without it the ``input`` trigger retrains every finished cell after the upgrade and whenever the
    resources folder moves; an edited loss module or a refetched backbone is still seen by ``mtime``."""
    folder = Path(metadata_dir)
    if not folder.is_dir():
        return 0
    workdir, basedir = os.path.abspath(workdir), os.path.abspath(basedir)
    results = os.path.abspath(results) if results is not None else None
    backbones = dict(backbones or {})
    changed = 0
    for record in folder.rglob("*"):
        try:
            if not record.is_file():
                continue
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        inputs = data.get("input") if isinstance(data, dict) else None
        if not isinstance(inputs, list) or not all(isinstance(p, str) for p in inputs):
            continue
        output = _recorded_output(record, folder)
        ours = results is not None and output is not None and _under(os.path.abspath(output), results)
        renamed = {p: _migrated(p, workdir, basedir, root, backbones if ours else {}) for p in inputs}
        if all(old == new for old, new in renamed.items()):
            continue
        data["input"] = sorted(renamed[p] for p in inputs)  # Snakemake records (and compares) them sorted
        checksums = data.get("input_checksums")
        if isinstance(checksums, dict):
            data["input_checksums"] = {renamed.get(p, p): value for p, value in checksums.items()}
        write_text(record, json.dumps(data))
        changed += 1
    return changed


def missing_backbone_problem(
    cells: Iterable[tuple[str, str | os.PathLike]],
    backbones: Mapping[str, str],
    targets: Sequence[str] = (),
) -> str | None:
    """The one line for the first backbone folder (``backbones``: {alias: its folder in this run's
    resources folder}) that is missing while finished cells read it (``cells``: each sentence cell's backbone
    alias and weights folder; existing weights mean finished). Fetching it again would make Snakemake retrain
    every such cell, so the run stops and says so. None when no such backbone is missing, or when every
    command-line target (``targets``) is a backbone folder: the fetch alone, asked for by name (the fix)."""
    wanted = {os.path.normpath(t) for t in targets}
    if wanted and wanted <= {os.path.normpath(folder) for folder in backbones.values()}:
        return None
    finished: dict[str, int] = {}
    for alias, weights in cells:
        if alias in backbones and not os.path.exists(backbones[alias]) and os.path.exists(weights):
            finished[alias] = finished.get(alias, 0) + 1
    for alias, count in finished.items():
        folder = backbones[alias]
        return (
            f"{folder} (backbone {alias}) is missing, but {count} finished cell(s) of this results folder "
            "were trained on it, and fetching it again retrains them; if you moved the resources folder, "
            "set resources_dir to its new place (--config resources_dir=<folder>); to fetch it again and "
            f"retrain them, fetch it alone first (the same command with the target {folder})"
        )
    return None
