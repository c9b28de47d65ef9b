"""Where things live, and how they are written: the repository root, the optional ``shared`` folder beside
it, the layout of a results folder (:class:`Results`, for the rules and the library alike), and the one
atomic write (a temporary file or folder renamed over the target) every writer of the package uses."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path | None:
    """The ``shared`` folder with real data and papers, or None when this clone has none.

    ``$CONTRASTLAB_SHARED`` wins; otherwise the folder ``shared`` beside the repository root.
    """
    env = os.environ.get("CONTRASTLAB_SHARED")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared"
    return candidate if (candidate / "data").is_dir() or (candidate / "papers").is_dir() else None


#: A cell's place under each folder of a results folder (checkpoints, metrics, logs, ...): the one spelling.
CELL_PATH = "{experiment}/{backbone}/{method}/seed{seed}"
CELL_FIELDS = ("experiment", "backbone", "method", "seed")

#: A cell's metrics file by its track.
METRICS_FILES = {"sentence": "senteval.json", "vision": "vision.json"}


class CellLike(Protocol):
    experiment: str
    backbone: str
    method: str
    seed: int | str


#: A place under a folder of the results: a cell, or a path as it is (``pretrained/<backbone>``).
Place = CellLike | Mapping[str, Any] | str


def cell_path(cell: CellLike | Mapping[str, Any]) -> str:
    """:data:`CELL_PATH` of ``cell``: a :class:`~contrastlab.config.Cell`, anything with its four
    attributes (Snakemake's wildcards) or a mapping of them. Fields holding wildcard braces
    (``"{method}"``) give the rules' pattern."""
    get = cell.__getitem__ if isinstance(cell, Mapping) else functools.partial(getattr, cell)
    return CELL_PATH.format(**{field: get(field) for field in CELL_FIELDS})


def _file(name: str, doc: str | None = None) -> property:
    """A property: ``<root>/<name>``, a file or folder at the top of the results."""
    return property(lambda self: f"{self.root}/{name}", doc=doc)


class _Layout:
    """A folder's layout: ``root``, a string; its repr names the class and the root."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.fspath(root)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"


class Results(_Layout):
    """The layout of one results folder, ``root`` (``results_dir``): each path a string ``<root>/...``,
    a file's or a Snakemake pattern's alike (a place holding wildcard braces). Benchmark files lie
    under the rule that writes them, so the cost table reads the rule from the folder."""

    def cell(self, place: Place) -> str:
        """The place's path under a folder of the results: a cell's :data:`CELL_PATH`, a string as is."""
        return place if isinstance(place, str) else cell_path(place)

    def _under(self, folder: str, place: Place | None, suffix: str = "") -> str:
        return (
            f"{self.root}/{folder}" if place is None else f"{self.root}/{folder}/{self.cell(place)}{suffix}"
        )

    def checkpoint(self, cell: Place | None = None, name: str | None = None) -> str:
        """``checkpoints/<cell>/<name>`` (``model``, ``encoder``, ``train_log.jsonl``); without a name
        the cell's folder, without a cell the folder of all checkpoints."""
        return self._under("checkpoints", cell, f"/{name}" if name else "")

    def metrics(self, cell: Place | None = None, track: str | None = None) -> str:
        """``metrics/<cell>/senteval.json`` (track ``sentence``) or ``vision.json`` (``vision``); without
        a track the cell's folder, without a cell the folder of all metrics."""
        return self._under("metrics", cell, f"/{METRICS_FILES[track]}" if track else "")

    def card(self, cell: Place) -> str:
        """``cards/<cell>/README.md``: the model card of a cell's checkpoint."""
        return self._under("cards", cell, "/README.md")

    def mteb(self, cell: Place | None = None) -> str:
        """``mteb/<cell>``: MTEB's evaluation of a cell's checkpoint (rule ``mteb``): MTEB's own results
        folder (``results/<model>/<revision>/<task>.json``), ``bridge.json`` and ``provenance.json``;
        without a cell the folder of all of them."""
        return self._under("mteb", cell)

    def log(self, rule: str, place: Place | None = None) -> str:
        """``logs/<rule>/<place>.log``, or ``logs/<rule>.log`` for a job of no place. ``rule`` names the
        folder, which a track's twins share (``train_vision`` logs under ``train``)."""
        return self._under("logs", rule if place is None else f"{rule}/{self.cell(place)}", ".log")

    def benchmark(self, rule: str, place: Place | None = None) -> str:
        """``benchmarks/<rule>/<place>.tsv``, or ``benchmarks/<rule>.tsv`` for a job of no place: the
        Snakemake benchmark file of the job, under the rule that writes it."""
        return self._under("benchmarks", rule if place is None else f"{rule}/{self.cell(place)}", ".tsv")

    def state(self, kind: str, place: Place | None = None) -> str:
        """``state/<kind>/<place>``: what a run keeps for itself (``train`` snapshots, ``features``,
        ``embeddings``, ``data`` markers), never a result."""
        return self._under(f"state/{kind}", place)

    def search_stage(self, experiment: str, backbone: str, method: str, stage: int | str) -> str:
        """``search/<experiment>/<backbone>/<method>/stage<k>.json``: one stage's selection of a search."""
        return f"{self.root}/search/{experiment}/{backbone}/{method}/stage{stage}.json"

    def tensorboard(self, cell: Place) -> str:
        """``tensorboard/<cell>``: a training job's TensorBoard run folder (``make monitor``)."""
        return self._under("tensorboard", cell)

    benchmarks = _file("benchmarks")
    tables = _file("tables")
    figures = _file("figures")
    plan = _file("plan", "``plan``: ``make plan``'s ``plan.md`` and ``plan.csv``.")
    report = _file("report.md", "``report.md`` (``report.html`` beside it).")
    calibration = _file(
        "calibration.json",
        "``calibration.json``: the measured calibration ``make gpu-check`` writes in its results.",
    )
    budget_pins = _file(
        "search/budget_pins.json",
        "``search/budget_pins.json``: the points each search's budget kept when the run first started "
        "(:func:`contrastlab.cost.budget.write_pins`).",
    )


class Resources(_Layout):
    """The layout of the folder backbones and data are materialised in, ``root`` (``resources_dir``):
    the one place a backbone's folder is spelled (a Snakemake pattern's alike: ``"{backbone}"``)."""

    def backbone_dir(self, alias: str) -> str:
        """The folder backbone ``alias`` is materialised in (its weights, tokenizer and ``config.json``)."""
        return f"{self.root}/models/{alias}"


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``target`` made a hard link to the file ``source`` resolves to (the same bytes, no space written
    twice), else (another file system, or one without hard links) a copy; ``shutil.copytree``'s
    ``copy_function`` for an export or a placement."""
    try:
        os.link(os.path.realpath(source), target)  # a link to a symlink would dangle once its cache moves
    except OSError:
        shutil.copy2(source, target)


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
    ``shutil.copytree`` or ``save_pretrained`` may create it) and put it in the place of ``path`` when
    the block ends without an exception; on an exception the temporary folder is removed and ``path`` is
    left as it was. The previous folder is renamed aside (``.<name>.<pid>.old``), the new one renamed
    into place, and only then is the previous one removed: a failed rename puts it back, and a killed
    job leaves the previous folder or the new one whole (a kill between the two renames, a matter of
    microseconds, leaves the previous one under its ``.old`` name). ``fsync``: the folder entry reaches
    the disk before this returns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(path)
    old = path.with_name(f".{path.name}.{os.getpid()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except OSError:
            if old.exists() and not path.exists():
                os.replace(old, path)
            raise
        if fsync:
            _fsync(path.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if path.exists():  # never the previous folder while nothing stands in its place
            shutil.rmtree(old, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` as UTF-8 atomically (:func:`atomic_write`): a reader sees the previous
    content or the new one, never half of it (a full disk, a killed job). Returns ``path``."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_yaml(path: str | os.PathLike) -> Any:
    """The YAML file at ``path`` as Python objects, through libyaml's safe loader where PyYAML has it
    (the same objects as ``yaml.safe_load``, about 8x faster: a job reads the config and the papers'
    tables and claims files)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)


def yaml_error_text(error: Exception) -> str:
    """A YAML file's read ``error`` in one line: what the parser expected (and in which construct), at which
    line and column (1-based, as an editor counts); a non-UTF-8 file's or a bad value's own first line."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem} ({context}){where}" if context else f"{problem}{where}"


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as indented, key-sorted JSON atomically (:func:`write_text`)."""
    write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object at ``path``; ``{}`` where it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class UnreadableMetricsError(ValueError):
    """A metrics file that cannot be parsed, or holds a score that is not a number: the message names
    the file, the key and the fix."""


#: The top-level keys of a metrics file that hold a score (``null`` where not measured), beside every
#: entry of its ``scores`` and :data:`TRAINING_SCORES` of its ``training`` block.
SCORE_KEYS = ("sts_avg", "tr_avg", "tr_devacc_avg")
TRAINING_SCORES = ("best_dev_spearman", "dev_uniformity_rebound")


def snakemake_record(folder: str | os.PathLike, key: str) -> Path:
    """Snakemake's file persistence's path of ``key``'s record in ``folder`` (``.snakemake/incomplete`` or
    ``metadata``): the key's urlsafe base64, cut into parts of at most the file system's name length less
    one, each but the last with a leading ``@`` (snakemake.persistence.file's ``_record_path``)."""
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX") or 255
    except (OSError, ValueError):
        name_max = 255
    b64 = base64.urlsafe_b64encode(key.encode()).decode()
    parts = [b64[i : i + name_max - 1] for i in range(0, len(b64), name_max - 1)]
    return Path(folder).joinpath(*["@" + part for part in parts[:-1]], parts[-1])


def _metrics_problem(found: Any) -> str | None:
    """What is wrong with a parsed metrics file, naming the key, or None: not a JSON object; no score key
    at all (a cell that ran would read "not run"); a score that is not a number (a string, a boolean) or
    is infinite. NaN is allowed: an evaluation that diverged writes it."""
    if not isinstance(found, dict):
        return "holds no JSON object"
    if not isinstance(found.get("scores", {}), dict):
        return f"holds {found['scores']!r} at scores, not a mapping of task to score"
    training = found.get("training") if isinstance(found.get("training"), dict) else {}
    marks = ("scores", *SCORE_KEYS, "diverged", "encoder_diverged")
    if not any(key in found for key in marks) and not any(key in training for key in TRAINING_SCORES):
        return (
            f"holds none of {', '.join(marks[:4])} (an evaluation writes them; the cell would read not run)"
        )
    scores = [
        *((f"scores.{task}", value) for task, value in found.get("scores", {}).items()),
        *((key, found.get(key)) for key in SCORE_KEYS),
        *((f"training.{key}", training.get(key)) for key in TRAINING_SCORES),
    ]
    for key, value in scores:
        if value is None and not key.startswith("scores."):
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"holds {value!r} at {key}, not a number"
        if math.isinf(value):
            return f"holds {value} at {key}, not a finite score"
    return None


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    """The metrics file at ``path`` (a cell's ``senteval.json`` or ``vision.json``, a Pretrained row's) as
    a dict. One that cannot be parsed (cut short, not UTF-8, not a JSON object) or whose scores are not
    numbers (:func:`_metrics_problem`: a string, infinity, no ``scores``) raises
    :class:`UnreadableMetricsError` naming the file, the key and the fix, for the first job that reads
    it."""
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        problem = f"cannot be read ({type(error).__name__}: {error})"
    else:
        problem = _metrics_problem(found)
        if problem is None:
            return found
    raise UnreadableMetricsError(
        f"metrics file {path} {problem}: delete it and run the workflow again: only that evaluation is "
        "redone, with what depends on it"
    )


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
