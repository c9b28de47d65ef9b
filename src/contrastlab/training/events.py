"""Live curves: a training run's JSON-lines records, written as TensorBoard scalars as it trains.

Every record a trainer writes to its log at the log points it already has is mirrored as scalars at the
record's step, under ``<prefix>/<key>`` (a key repeating the prefix loses it, nested dicts are flattened
with ``/``):

=========  ======  ===================================================================================
record     prefix  scalars
=========  ======  ===================================================================================
train      train   loss (the interval's mean), loss_last, lr, grad_norm, loss_scale and skipped_steps
                   (fp16), steps_per_s, sentences_per_s or images_per_s, ms_per_step, and the loss's
                   stats (``train/stats/align``, ``train/stats/gd_active``: the gradient paradigm, ...)
eval       dev     the sentence cells' dev evaluation: ``dev/spearman`` (STS-B dev by default),
                   ``dev/align``, ``dev/uniformity``, ``dev/best_dev_spearman``
val        val     the vision cells' validation loss (``keep: best_val_loss``): ``val/loss``,
                   ``val/best_val_loss``
geometry   probe   the analysis probe (``analysis_every``, :mod:`contrastlab.training.geometry`):
                   ``probe/align``, ``probe/uniformity``, ``probe/gd_active``, ``probe/ratio/met``, ...,
                   and the dev sentences' ``probe/dev_l_cl``, ...
=========  ======  ===================================================================================

The values are the log's own Python numbers: no host-device sync is added, and nothing is written
between log points. ``ms_per_step`` is the only derived value (1000 / ``steps_per_s``).

Resume: a run resumed from its snapshot of step S continues its curves with each step exactly once.
The killed run may have written steps after S, which the resumed run writes again. TensorBoard's own
answer, ``purge_step=S + 1`` (a ``SessionLog.START`` at S + 1), is honoured by its default (Rust) data
loader but not by its Python loader (``--load_fast=false``, where the steps show twice), nor by other
readers of the files. So the resumed run's event file starts with that marker *and* with the earlier
files' events up to step S (each tag and step once, the last written kept), after which the earlier
files are deleted: the folder then holds the curves of one uninterrupted run, whatever reads it. The
writer is flushed with every snapshot, so everything up to a snapshot's step is on disk before the
snapshot is. A fresh start removes the folder's earlier event files (a changed cell starts its curves
over).

HParams: the run's settings (the trainer's ``TrainSettings`` / ``VisionTrainSettings``, :func:`hparams`)
are written once, at step 0, as TensorBoard's HParams session (``tensorboard.plugins.hparams``), so the
HParams view of ``make monitor`` lists every cell with its settings beside the final value of each of its
scalars: ``dev/best_dev_spearman`` (sentence cells) and ``val/best_val_loss`` (vision cells, ``keep:
best_val_loss``) are the final dev scores. Test scores are computed by the evaluation jobs after training
and are not in the HParams view. A resumed run keeps the session of its fresh start (it is an event at
step 0).

Never fails the run: TensorBoard missing, a folder that cannot be made, or any error while writing is one
warning line (logger ``contrastlab.training.events``), after which the run writes no more events and
trains on.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_LOG = logging.getLogger(__name__)
EVENT_FILES = "events.out.tfevents.*"  # the SummaryWriter's file names in a run folder
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


class TensorBoardLog:
    """The event files of one run in ``folder`` (``None``: off, every call a no-op), with the run's
    ``settings`` as its HParams session (:func:`hparams`; ``None``: no session).

    :meth:`start` opens the writer (fresh, or resumed after a snapshot's step); :meth:`write` takes the
    run's log records; :meth:`flush` goes with every snapshot; :meth:`close` ends the run's events.
    """

    def __init__(self, folder: str | Path | None, settings: Mapping[str, Any] | None = None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.settings = settings
        self.failed: str | None = None  # the warning given when writing stopped
        self._writer = None

    def start(self, resume_step: int | None) -> None:
        """Open the writer: a fresh run clears the folder's event files; a run resumed from the snapshot
        of ``resume_step`` keeps their steps up to it, and only those (module docstring)."""
        if self.folder is None or self.failed:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.folder.mkdir(parents=True, exist_ok=True)
            earlier = sorted(self.folder.glob(EVENT_FILES))
            kept = [] if resume_step is None else _events_up_to(earlier, resume_step)
            purge = None if resume_step is None else resume_step + 1
            self._writer = SummaryWriter(str(self.folder), purge_step=purge, flush_secs=FLUSH_SECS)
            for event in kept:
                self._writer.file_writer.add_event(event, walltime=event.wall_time)
            if self.settings is not None and not any(_is_session(event) for event in kept):
                from tensorboard.plugins.hparams.summary_v2 import hparams_pb

                self._writer.file_writer.add_summary(hparams_pb(hparams(self.settings)), global_step=0)
            self._writer.flush()  # the kept steps on disk before the files they come from go
            for path in earlier:
                path.unlink()
        except Exception as err:
            self._stop("cannot start", err)

    def write(self, record: Mapping[str, Any]) -> None:
        """Add the scalars of one log record (:func:`scalars`) at its step."""
        if self._writer is None or record.get("event") not in PREFIXES:
            return
        try:
            for tag, value in scalars(record).items():
                self._writer.add_scalar(tag, value, record["step"])
        except Exception as err:
            self._stop("cannot write", err)

    def flush(self) -> None:
        """Everything written so far to disk (before a snapshot)."""
        if self._writer is None:
            return
        try:
            self._writer.flush()
        except Exception as err:
            self._stop("cannot write", err)

    def close(self) -> None:
        if self._writer is None:
            return
        try:
            self._writer.close()
        except Exception as err:
            self._stop("cannot write", err)
        self._writer = None

    def _stop(self, what: str, err: Exception) -> None:
        text = f"TensorBoard events {what} {self.folder} ({type(err).__name__}: {err}); training goes on"
        self.failed = " ".join(text.split())  # one line
        _LOG.warning(self.failed)
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()


def _is_session(event: Any) -> bool:
    """Whether a kept summary event is the run's HParams session (written at its fresh start)."""
    return any(value.tag == SESSION_TAG for value in event.summary.value)


def _events_up_to(paths: list[Path], last_step: int) -> list:
    """The summary events of the files ``paths`` (in their order) with steps up to ``last_step``, each
    (step, tags) once (the last written kept), in step order."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    latest: dict[tuple, Any] = {}
    for path in paths:
        for event in LegacyEventFileLoader(str(path)).Load():  # stops at a record cut by a kill
            if event.HasField("summary") and event.step <= last_step:
                key = (event.step, tuple(value.tag for value in event.summary.value))
                latest.pop(key, None)
                latest[key] = event
    return sorted(latest.values(), key=lambda event: event.step)
