"""Live curves: a training run's JSON-lines records, mirrored as TensorBoard scalars (and optionally W&B).

Each record is written at its own step as ``<prefix>/<key>`` (nested dicts flattened with ``/``): ``train``
records under ``train/`` (loss, lr, grad_norm, throughput, the loss's stats), sentence ``eval`` under
``dev/``, vision ``val`` under ``val/``, the ``geometry`` probe (:mod:`contrastlab.training.geometry`)
under ``probe/``. Values are the log's own numbers (no host-device sync added); ``ms_per_step`` is the
only derived one. The settings (:func:`hparams`, :func:`cell_settings`) are one HParams session at step 0
named by the cell's path (TensorBoard averages sessions with equal settings, which would merge one
loss on two backbones), and the evaluation job adds the headline test scores in a file of their own
(:func:`write_test_scores`); :class:`WandbRun` / :class:`WandbLog` send the same to one W&B run per cell.

Guarantees: a run resumed from its snapshot of step S shows each step once (the earlier files' events up
to S are rewritten behind a ``purge_step=S + 1`` marker and the earlier files deleted; a file damaged
before S is read up to the damage, with one warning). It never fails the run: a missing package, an
unwritable folder or any error while writing is one warning line, after which that sink stops and the
run trains on. The user-facing description is docs/reproduction.md, "Live training curves".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.paths import CELL_FIELDS, Results, cell_path

_LOG = logging.getLogger(__name__)
EVENT_FILES = "events.out.tfevents.*"  # the SummaryWriter's file names in a run folder
TEST_SUFFIX = ".test"  # the evaluation job's event file of a run folder: events.out.tfevents.*.test
SESSION_TAG = "_hparams_/session_start_info"  # the tag of tensorboard's HParams session summary
FLUSH_SECS = 30  # the writer's own background flush (the default, 120 s, is slow for live curves)
PREFIXES = {"train": "train", "eval": "dev", "val": "val", "geometry": "probe"}  # record event -> prefix
# Numbers of a record that are bookkeeping, not curves.
NOT_CURVES = frozenset({"event", "step", "epoch", "best_step", "kept_epoch", "probe_sentences"})


def default_events_dir(state_dir: str | Path) -> Path:
    """The run folder of a trainer not given one: beside its state folder, ``<state_dir>.tensorboard``
    (the state folder itself is removed when the run ends)."""
    state_dir = Path(state_dir)
    return state_dir.with_name(state_dir.name + ".tensorboard")


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The TensorBoard scalars of one log record (``{}`` for records without curves).

    >>> scalars({"event": "eval", "step": 4, "dev_task": "STSBenchmark", "dev_spearman": 61.5})
    {'dev/spearman': 61.5}
    >>> scalars({"event": "train", "step": 4, "loss": 2.5, "steps_per_s": 8.0, "stats": {"align": 0.9}})
    {'train/loss': 2.5, 'train/steps_per_s': 8.0, 'train/stats/align': 0.9, 'train/ms_per_step': 125.0}
    """
    prefix = PREFIXES.get(record.get("event"))
    if prefix is None:
        return {}
    out: dict[str, float] = {}

    def add(tag: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                add(f"{tag}/{key}", inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[tag] = float(value)

    for key, value in record.items():
        if key not in NOT_CURVES:
            add(f"{prefix}/{key.removeprefix(prefix + '_')}", value)
    if record.get("steps_per_s"):
        out[f"{prefix}/ms_per_step"] = 1000.0 / record["steps_per_s"]
    return out


def hparams(settings: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """A run's settings as TensorBoard HParams values: nested mappings flattened with ``/``; booleans,
    numbers and strings as they are; anything else (None, lists, an empty mapping) as its JSON text, so
    that every setting is a column.

    >>> hparams({"lr": 3e-05, "loss": {"tau": 0.05}, "loss_hp": {}, "max_len": None, "sizes": [1, 2]})
    {'lr': 3e-05, 'loss/tau': 0.05, 'loss_hp': '{}', 'max_len': 'null', 'sizes': '[1, 2]'}
    """
    out: dict[str, bool | int | float | str] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping) and value:
            out.update({f"{key}/{inner}": v for inner, v in hparams(value).items()})
        elif isinstance(value, bool | int | float | str):
            out[key] = value
        else:
            out[key] = json.dumps(value, default=str)  # never fails: an odd value is its text
    return out


def cell_settings(cell: Any) -> dict[str, str | int]:
    """The fields that name a cell, as settings: experiment, backbone, method (a search point's name
    included) and seed, a number; ``cell`` is a job's wildcards, a :class:`~contrastlab.config.Cell` or a
    mapping of the four (:data:`~contrastlab.paths.CELL_FIELDS`).

    >>> cell_settings({"experiment": "nie2023", "backbone": "minilm", "method": "cl", "seed": "42"})
    {'experiment': 'nie2023', 'backbone': 'minilm', 'method': 'cl', 'seed': 42}
    """
    found = {
        field: cell[field] if isinstance(cell, Mapping) else getattr(cell, field) for field in CELL_FIELDS
    }
    seed = str(found["seed"])
    return {**found, "seed": int(seed) if seed.isdigit() else seed}


def _with_cell(settings: Mapping[str, Any] | None, cell: Any) -> Mapping[str, Any] | None:
    """A run's settings with its cell's fields first (:func:`cell_settings`; ``cell`` None: as they are;
    the settings' own ``seed`` is the cell's)."""
    if settings is None or cell is None:
        return settings
    return {**cell_settings(cell), **settings}


def headline_test_scores(metrics: Mapping[str, Any]) -> dict[str, float]:
    """A cell's headline test scores, from its metrics file (the evaluation job's), as scalars: a sentence
    cell's STS and transfer averages (``test/sts_avg``, ``test/tr_avg``, each where its tasks were scored),
    an image cell's top-1 accuracy of each probe (``test/linear_top1``, ``test/knn_top1``,
    ``test/ffn<P>_top1``).

    >>> headline_test_scores({"scores": {"STS12": 70.0}, "sts_avg": 76.25, "tr_avg": None})
    {'test/sts_avg': 76.25}
    >>> headline_test_scores({"scores": {"linear_top1": 88.5, "knn_top1": 85.0, "embedding_variance": 0.25}})
    {'test/linear_top1': 88.5, 'test/knn_top1': 85.0}
    """
    found = {key: metrics.get(key) for key in ("sts_avg", "tr_avg")}
    found |= {key: value for key, value in (metrics.get("scores") or {}).items() if key.endswith("_top1")}
    return {
        f"test/{key}": float(value)
        for key, value in found.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def write_test_scores(folder: str | Path, scores: Mapping[str, float]) -> bool:
    """Write ``scores`` (:func:`headline_test_scores`) into the TensorBoard run folder ``folder`` of the
    cell's training, as scalars at the run's last step, so that the HParams view shows them as metrics of
    its session. Only where that training wrote a session (nothing for a cell trained with ``tensorboard:
    false``); the file of an earlier evaluation (``*.test``) is replaced. Returns whether they were
    written; a failure is one warning line, never the job's."""
    folder = Path(folder)
    try:
        earlier = sorted(folder.glob(EVENT_FILES))
        tested = [path for path in earlier if path.name.endswith(TEST_SUFFIX)]  # an earlier evaluation's
        training = _events_up_to([path for path in earlier if path not in tested], last_step=sys.maxsize)
        if not any(_is_session(event) for event in training):
            return False
        for path in tested:
            path.unlink()
        if not scores:
            return False
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scores.items()]
        writer = EventFileWriter(str(folder), filename_suffix=TEST_SUFFIX)
        step = max(event.step for event in training)
        writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))
        writer.close()
        return True
    except Exception as err:
        _warn(f"TensorBoard test scores not written to {folder} ({type(err).__name__}: {err})")
        return False


def log_test_scores(
    metrics: Mapping[str, Any], place: Mapping[str, Any], results: Results, wandb_run: WandbRun | None
) -> dict[str, float]:
    """The evaluation job's logging: the :func:`headline_test_scores` of ``metrics`` into the TensorBoard
    run folder, under ``results``, of the cell ``place`` names (its wildcards; :func:`write_test_scores`)
    and into the summary of the cell's W&B run, if it has one (:meth:`WandbRun.of`). A place that is no
    cell (a Pretrained row) gets nothing. Returns the scores logged."""
    place = dict(place.items())
    if not set(CELL_FIELDS) <= set(place):
        return {}
    scores = headline_test_scores(metrics)
    write_test_scores(results.tensorboard(place), scores)
    if wandb_run is not None and scores:
        wandb_run.summarise(scores)
    return scores


@dataclass(frozen=True)
class WandbRun:
    """The Weights & Biases run of one cell: ``project`` (config ``logging.wandb``) and ``name``, the
    cell's path; its :attr:`id` is derived from both, so that the training job, its resume and the
    evaluation job all write to the one run (``resume="allow"``). ``root``: the folder wandb writes its
    ``wandb/`` folder into where ``WANDB_DIR`` is unset (the results folder; None: the working directory,
    wandb's default)."""

    project: str
    name: str
    root: str | None = None

    @property
    def id(self) -> str:
        """``cl-`` and 24 hex digits of the SHA-256 of project and name (W&B ids allow no ``/``)."""
        return "cl-" + hashlib.sha256(f"{self.project}\0{self.name}".encode()).hexdigest()[:24]

    @classmethod
    def of(cls, project: str | None, place: Mapping[str, Any], root: str | None = None) -> WandbRun | None:
        """The run of the cell ``place`` (a job's wildcards) in ``project`` (config ``logging.wandb``:
        :attr:`contrastlab.config.Options.wandb_project`), wandb's files under ``root``; None without a
        project or for a place that is no cell."""
        place = dict(place.items())
        if not project or not set(CELL_FIELDS) <= set(place):
            return None
        return cls(project, cell_path(place), root)

    def init(self, settings: Mapping[str, Any] | None = None) -> Any:
        """``wandb.init`` of this run (created, or continued), with ``settings`` as its config."""
        import wandb

        root = self.root if self.root is not None and not os.environ.get("WANDB_DIR") else None
        if root is not None:
            Path(root).mkdir(parents=True, exist_ok=True)
        config = dict(settings) if settings is not None else None
        return wandb.init(
            project=self.project, name=self.name, id=self.id, resume="allow", config=config, dir=root
        )

    def summarise(self, scores: Mapping[str, float]) -> None:
        """Add ``scores`` to the run's summary (beside its config in W&B's runs table); a failure is one
        warning line."""
        try:
            run = self.init()
            run.summary.update(dict(scores))
            run.finish()
        except Exception as err:
            _warn(f"Weights & Biases run {self.name} got no test scores ({type(err).__name__}: {err})")


class _Sink:
    """A mirror of the run's log that never fails it: the first error is one warning line
    (:meth:`_stop`), after which every call is a no-op. ``_open`` is the open handle (None: off)."""

    _open: Any = None
    failed: str | None = None  # the warning given when it stopped

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as err:
            self._stop(what, err)

    def write(self, record: Mapping[str, Any]) -> None:
        """Log the scalars of one log record (:func:`scalars`) at its step."""
        if self._open is None or record.get("event") not in PREFIXES:
            return
        with self._guard(self.WRITE):
            self._write(scalars(record), record["step"])

    def close(self) -> None:
        if self._open is not None:
            with self._guard(self.CLOSE):
                self._close(self._open)
            self._open = None

    def _stop(self, what: str, err: Exception) -> None:
        self.failed = _warn(
            f"{self.what} {what} {self.where} ({type(err).__name__}: {err}); training goes on"
        )
        handle, self._open = self._open, None
        if handle is not None:
            with contextlib.suppress(Exception):
                self._close(handle, failed=True)


class WandbLog(_Sink):
    """The W&B side of a training run (``run``: its :class:`WandbRun`; ``None``: off, every call a no-op),
    with the ``settings`` as its config after the fields of ``cell`` (:func:`cell_settings`)."""

    what, WRITE, CLOSE = "Weights & Biases run", "cannot log", "cannot finish"

    def __init__(
        self, run: WandbRun | None, settings: Mapping[str, Any] | None = None, cell: Any = None
    ) -> None:
        self.run, self.settings = run, _with_cell(settings, cell)
        self.where = run.name if run is not None else None

    def start(self, resume_step: int | None) -> None:
        """Open the run: created at a fresh start, continued at a resume (``resume_step``, as
        :meth:`TensorBoardLog.start` takes it: the same id continues the run, so nothing differs here)."""
        if self.run is not None and not self.failed:
            with self._guard("cannot start"):
                self._open = self.run.init(self.settings)

    def _write(self, values: dict[str, float], step: int) -> None:
        if values:
            self._open.log(values, step=step)

    def _close(self, run: Any, failed: bool = False) -> None:
        run.finish(exit_code=1) if failed else run.finish()


class TensorBoardLog(_Sink):
    """The event files of one run in ``folder`` (``None``: off, every call a no-op), with the run's
    ``settings`` as its HParams session (:func:`hparams`; ``None``: no session). ``cell``: the cell trained
    (a job's wildcards), whose fields lead the session and whose path names its trial (None: TensorBoard's
    hash of the settings)."""

    what, WRITE, CLOSE = "TensorBoard events", "cannot write", "cannot write"

    def __init__(
        self, folder: str | Path | None, settings: Mapping[str, Any] | None = None, cell: Any = None
    ) -> None:
        self.folder = self.where = Path(folder) if folder is not None else None
        self.settings = _with_cell(settings, cell)
        self.trial = cell_path(cell) if cell is not None else None

    def start(self, resume_step: int | None) -> None:
        """Open the writer: a fresh run clears the folder's event files; a run resumed from the snapshot
        of ``resume_step`` keeps their steps up to it, and only those (module docstring)."""
        if self.folder is None or self.failed:
            return
        with self._guard("cannot start"):
            from torch.utils.tensorboard import SummaryWriter

            self.folder.mkdir(parents=True, exist_ok=True)
            earlier = sorted(self.folder.glob(EVENT_FILES))
            kept = [] if resume_step is None else _events_up_to(earlier, resume_step, warn=True)
            purge = None if resume_step is None else resume_step + 1
            self._open = SummaryWriter(str(self.folder), purge_step=purge, flush_secs=FLUSH_SECS)
            for event in kept:
                self._open.file_writer.add_event(event, walltime=event.wall_time)
            if self.settings is not None and not any(_is_session(event) for event in kept):
                from tensorboard.plugins.hparams.summary_v2 import hparams_pb

                session = hparams_pb(hparams(self.settings), trial_id=self.trial)
                self._open.file_writer.add_summary(session, global_step=0)
            self._open.flush()  # the kept steps on disk before the files they come from go
            for path in earlier:
                path.unlink()

    def _write(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self._open.add_scalar(tag, value, step)

    def flush(self) -> None:
        """Everything written so far to disk (before a snapshot)."""
        if self._open is not None:
            with self._guard(self.WRITE):
                self._open.flush()

    def _close(self, writer: Any, failed: bool = False) -> None:
        writer.close()


def _warn(text: str) -> str:
    """Log ``text`` as one warning line (an error's message may hold newlines); returns that line."""
    line = " ".join(text.split())
    _LOG.warning(line)
    return line


def _is_session(event: Any) -> bool:
    """Whether a kept summary event is the run's HParams session (written at its fresh start)."""
    return any(value.tag == SESSION_TAG for value in event.summary.value)


def _events_up_to(paths: list[Path], last_step: int, *, warn: bool = False) -> list:
    """The summary events of the files ``paths`` (in their order) with steps up to ``last_step``, each
    (step, tags) once (the last written kept), in step order. ``warn``: a file damaged before
    ``last_step`` is one warning line naming it and the steps lost (:func:`_read_events`)."""
    latest: dict[tuple, Any] = {}
    for path in paths:
        events, damage = _read_events(path)
        steps = [event.step for event in events if event.HasField("summary")]
        if warn and damage is not None and (not steps or steps[-1] < last_step):
            lost = f"{steps[-1] + 1}-{last_step}" if steps else f"up to {last_step}"
            _warn(
                f"TensorBoard events file {path} is damaged at byte {damage}: its steps {lost} are lost from "
                f"the curves; the resumed run writes from step {last_step + 1}"
            )
        for event in events:
            if event.HasField("summary") and event.step <= last_step:
                key = (event.step, tuple(value.tag for value in event.summary.value))
                latest.pop(key, None)
                latest[key] = event
    return sorted(latest.values(), key=lambda event: event.step)


def _read_events(path: Path) -> tuple[list, str | None]:
    """The events of the event file ``path`` (TFRecords: a u64 length and its masked crc32c, the
    serialised ``Event`` and its crc), in order, up to its end or its first damaged record, and where
    the damage is (``"<byte> (why)"``; None where there is none). A record cut short at the end of the
    file, as a killed writer leaves its last, ends the events without damage; TensorBoard's own loader
    stops at either without a word."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data, at, events = Path(path).read_bytes(), 0, []
    while at + 12 <= len(data):
        (length,), (length_crc,) = struct.unpack_from("<Q", data, at), struct.unpack_from("<I", data, at + 8)
        if masked_crc32c(data[at : at + 8]) != length_crc:
            return events, f"{at} (a record fails its crc32 check)"
        body, end = data[at + 12 : at + 12 + length], at + 12 + length + 4
        if end > len(data):
            break  # cut short by a kill
        if masked_crc32c(body) != struct.unpack_from("<I", data, end - 4)[0]:
            return events, f"{at} (a record fails its crc32 check)"
        try:
            events.append(Event.FromString(body))
        except DecodeError:  # a record whose crc holds, but no event (written so by something else)
            return events, f"{at} (a record is no event)"
        at = end
    return events, None
