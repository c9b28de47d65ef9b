"""The loss code a rule names as input: a change of the code of a loss's module (not of the helpers it
imports) retrains the cells that use it, while an edit of its docstrings, comments or layout, a pull that
rewrites its file, or a moved or copied checkout retrains nothing.

A rule names the loss module's code stamp (:func:`code_stamp`), a file under ``.snakemake`` that holds the
digest of the module's code and is rewritten only when that changes: Snakemake's ``mtime`` trigger and its
recorded checksum then see the code, not the file. A module inside the working directory is named relative
to it and one outside it (a user's loss in their own folder) by its absolute path, since Snakemake reruns
a job whose recorded input paths differ from today's. :func:`migrate_recorded_sources` rewrites the
records of jobs that finished before this spelling (the module itself, or its absolute path), and a
backbone's folder when ``resources_dir`` has moved, so that the upgrade itself retrains nothing.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
from base64 import urlsafe_b64decode
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from contrastlab.artifacts import sha256_file
from contrastlab.losses.user import module_path
from contrastlab.paths import REPO_ROOT, write_text

__all__ = [
    "CODE_STAMPS",
    "LOCATION_KEYS",
    "code_digest",
    "code_stamp",
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

#: Where the code stamps lie, under the working directory (beside Snakemake's own records).
CODE_STAMPS = os.path.join(".snakemake", "contrastlab", "code")

#: Each built-in loss module as 0.2.0 shipped it, the last bytes recorded before the code stamps: (sha256
#: of its bytes, :func:`code_digest` of its code), 32 hex digits of each. A record of those bytes is of
#: today's code while the code digest is the same, so a later edit of a docstring retrains nothing. Never
#: updated: a change of a module's code makes its 0.2.0 records retrain.
RECORDED_BEFORE_STAMPS = {
    "li2024": ("19dc4c156f4a2e1b22d1f57918aa44a8", "48ecbd57b4f02fb635cf1b291057de28"),
    "macl": ("0bf4c00d5599411984766a77216ad9fa", "352126122436ab31af3265a049b6b79a"),
    "nie2023": ("3f79900b613d959ce1e4d0a40c80bb7f", "2f0d80e13c86cb07594dbdf41dc7b4c4"),
    "oar": ("ed158811589b39cae6fe6465f2473938", "7767502526f31813fc1eabea105ac4d7"),
    "vision": ("656b4f18bd3dbf1aeafa25af1d2e30d3", "fdcfd2b387b6fbfd558ce51f61e3d119"),
}

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


def code_digest(source: str | bytes) -> str:
    """sha256 of a module's code (its text, or its bytes with their BOM or coding cookie): its syntax tree
    without docstrings (comments and layout are not in it), written field by field with empty fields left
    out, so that a Python whose ``ast`` adds a field (3.12's ``type_params``) digests the same code alike;
    an f-string's empty text parts, which 3.12 adds after a nested format spec, are left out too."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if ast.get_docstring(node, clean=False) is not None:
                node.body = node.body[1:] or [ast.Pass()]
        if isinstance(node, ast.JoinedStr):
            node.values = [v for v in node.values if not (isinstance(v, ast.Constant) and v.value == "")]

    def plain(value):
        if isinstance(value, ast.AST):
            fields = {name: getattr(value, name, None) for name in value._fields}
            return [
                type(value).__name__,
                {k: plain(v) for k, v in fields.items() if v is not None and v != []},
            ]
        if isinstance(value, list):
            return [plain(item) for item in value]
        return repr(value)

    return hashlib.sha256(json.dumps(plain(tree), sort_keys=True).encode()).hexdigest()


def _stamp_path(source: str) -> str:
    """Where :func:`code_stamp` keeps the digest of module ``source``: its own path under
    :data:`CODE_STAMPS` (an absolute one under ``@``), ending ``.code``."""
    return os.path.join(CODE_STAMPS, "@" + source if os.path.isabs(source) else source) + ".code"


def code_stamp(source: str, workdir: str | os.PathLike) -> str:
    """The code stamp of loss module ``source`` (as :func:`source_path` spells it for ``workdir``), made
    current: it holds :func:`code_digest` and is written only when that differs, so its date is the code's
    last change. A new stamp takes the module's own date, so the first run after the upgrade decides as
    the module's date did. A module that cannot be read or parsed is named itself (Snakemake says it is
    missing; the loss's own check names its error)."""
    module, stamp = Path(workdir, source), Path(workdir, _stamp_path(source))
    try:
        digest = code_digest(module.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return source
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == digest:
        return _stamp_path(source)
    new = not stamp.is_file()
    write_text(stamp, digest)
    if new:
        dated = module.stat()
        os.utime(stamp, ns=(dated.st_atime_ns, dated.st_mtime_ns))
    return _stamp_path(source)


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
    ``backbones[alias]``; a ``.py`` input (a loss module, the only Python files rules named as inputs), or
    the stamp of one outside the working directory, is the module as :func:`source_path` spells it: a
    built-in loss module of any checkout (one copied from, or moved since) is this checkout's at the same
    place, a user's file is the same file. Anything else is left as recorded."""
    parent, alias = os.path.split(recorded)
    if alias in backbones and os.path.basename(parent) == "models":
        return backbones[alias]
    outside = os.path.join(CODE_STAMPS, "@")
    if recorded.startswith(outside) and recorded.endswith(".py.code"):  # stamped; as its module, moved
        module = _migrated(recorded[len(outside) : -len(".code")], workdir, basedir, root, backbones)
        return module if os.path.isfile(os.path.join(workdir, module)) else recorded
    if not recorded.endswith(".py"):
        return recorded
    builtin = _BUILTIN_LOSS.search(recorded)
    if builtin and (Path(root) / builtin.group(1)).is_file():  # this checkout's, wherever the old one is
        return source_path(Path(root) / builtin.group(1), workdir, basedir, root)
    if os.path.exists(os.path.join(workdir, recorded)):
        return source_path(os.path.join(workdir, recorded), workdir, basedir, root)
    return recorded


def _checksum(path: Path) -> str:
    """A file's checksum as Snakemake records it."""
    return "sha256:" + sha256_file(path)


def _same_code(checksum, module: Path, code: str) -> bool:
    """Whether a module recorded with ``checksum`` (its bytes) had today's code (``code``, its
    :func:`code_digest`, as its stamp holds it): its bytes are today's, or a built-in module's as 0.2.0
    shipped it (:data:`RECORDED_BEFORE_STAMPS`) with today's code."""
    checksum = checksum if ":" in str(checksum) else f"sha256:{checksum}"  # an older Snakemake's: bare
    if checksum == _checksum(module):
        return True
    builtin = _BUILTIN_LOSS.search(module.as_posix())  # module: absolute
    shipped = RECORDED_BEFORE_STAMPS.get(Path(builtin.group(1)).stem) if builtin else None
    if shipped is None or not checksum.startswith("sha256:" + shipped[0]):
        return False
    return code.startswith(shipped[1])


def _carried(checksum, module: str, renamed: str, workdir: str):
    """A recorded input's checksum under its new name: a loss module's recorded with today's code
    (:func:`_same_code`) becomes its code stamp's; any other is kept, so dates decide."""
    if module == renamed:
        return checksum
    stamp = Path(workdir, renamed)
    if not _same_code(checksum, Path(workdir, module), stamp.read_text(encoding="utf-8")):
        return checksum
    return _checksum(stamp)


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
    thing as today's: a loss-module input (relative, or absolute in any checkout) into its code stamp
    (:func:`code_stamp`), with the stamp's checksum where the recorded module had today's code
    (:func:`_same_code`); the stamp of a module of a checkout since moved into this one's; and, for outputs
    under ``results``, a backbone's folder in another resources folder into this run's
    ``backbones[alias]``. Returns how many records changed; running it again changes nothing, and a record
    it cannot read is left alone. Without it the ``input`` trigger retrains every finished cell after the
    upgrade and whenever the resources folder moves; a module edited since, or a refetched backbone, is
    still seen by ``mtime`` (a new stamp takes its module's date)."""
    folder = Path(metadata_dir)
    if not folder.is_dir():
        return 0
    workdir, basedir = os.path.abspath(workdir), os.path.abspath(basedir)
    results = os.path.abspath(results) if results is not None else None
    backbones = dict(backbones or {})
    stamp = functools.cache(lambda module: code_stamp(module, workdir))  # a module read once, not per record
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
        spelled = {p: _migrated(p, workdir, basedir, root, backbones if ours else {}) for p in inputs}
        renamed = {p: stamp(s) if s.endswith(".py") else s for p, s in spelled.items()}
        if all(old == new for old, new in renamed.items()):
            continue
        data["input"] = sorted(renamed[p] for p in inputs)  # Snakemake records (and compares) them sorted
        checksums = data.get("input_checksums")
        if isinstance(checksums, dict):
            data["input_checksums"] = {
                renamed.get(p, p): _carried(value, spelled.get(p, p), renamed.get(p, p), workdir)
                for p, value in checksums.items()
            }
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
