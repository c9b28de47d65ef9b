"""One training job of the workflow per track: what a cell's job does around its trainer.

A configured cell trains, and its divergence is a failure. A search point (:mod:`contrastlab.search`)
or an image sweep's point that diverges is a result: its ``diverged.json``
(:func:`contrastlab.search.record_diverged`) is read by selection, the image evaluation and the
figures, and the run goes on. A later search stage's point completes its settings from the earlier
winner (:func:`contrastlab.search.resolve_point`); when they equal the winner's, the winner's checkpoint
is copied instead of training the same settings twice (Li A.4's second grid holds the first's winner).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from contrastlab.paths import atomic_dir, atomic_write
from contrastlab.search import SearchPoint, record_diverged, resolve_point, same_as_winner
from contrastlab.training.runtime import NonFiniteLossError
from contrastlab.training.sentence import TrainSettings, train
from contrastlab.training.vision import VisionTrainSettings, train_vision


def train_cell(
    settings: Mapping[str, Any],
    *,
    point: SearchPoint | None,
    previous_selection: str | Path | None,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    **train_args: Any,
) -> str:
    """Train one sentence cell into ``out_dir`` (its checkpoint) and ``log_path``; returns what became of
    it: ``"trained"``, ``"copied"`` (a later-stage point equal to the earlier winner) or ``"diverged"``.

    ``point``: the search point the cell is, None for a configured cell (whose divergence raises
    :class:`NonFiniteLossError`). ``previous_selection``: the earlier stage's selection file of a
    later-stage point (its settings start from that winner), None otherwise. ``train_args``: the other
    keyword arguments of :func:`~contrastlab.training.sentence.train` (``backbone_dir``,
    ``corpus_path``, ``dev_data_dir``, ``keep_state``, ...)."""
    settings = dict(settings)
    if previous_selection is not None:
        if point is None:
            raise ValueError("train_cell: a previous stage's selection is for a later stage's point")
        settings = resolve_point(settings, previous_selection, point)
        winner = same_as_winner(settings, previous_selection)
        if winner is not None:  # one setting, one training: the earlier winner's checkpoint is this point's
            print(f"search: settings equal the earlier winner's; copying {winner}")
            with atomic_dir(out_dir) as tmp:
                shutil.copytree(winner, tmp)
            with atomic_write(log_path) as tmp:
                shutil.copyfile(Path(winner).with_name("train_log.jsonl"), tmp)
            return "copied"
    paths = dict(out_dir=out_dir, log_path=log_path, state_dir=state_dir)
    run = functools.partial(train, TrainSettings.from_dict(settings), **paths, **train_args)
    return _diverging_is_a_result(run, point is not None, settings, **paths)


def train_vision_cell(
    settings: Mapping[str, Any],
    *,
    point: bool,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    **train_args: Any,
) -> str:
    """Train one image cell into ``out_dir`` (its encoder) and ``log_path``; returns ``"trained"`` or
    ``"diverged"``. ``point``: whether the cell is a point of its experiment's sweep
    (:meth:`contrastlab.config.Experiment.is_sweep_point`), whose divergence is recorded; a configured
    cell's raises :class:`NonFiniteLossError`. ``train_args``: the other keyword arguments of
    :func:`~contrastlab.training.vision.train_vision` (``data_root``, ``keep_state``, ...)."""
    settings = dict(settings)
    paths = dict(out_dir=out_dir, log_path=log_path, state_dir=state_dir)
    run = functools.partial(train_vision, VisionTrainSettings.from_dict(settings), **paths, **train_args)
    return _diverging_is_a_result(run, point, settings, **paths)


#: ``cli``'s required options and the keyword of :func:`~contrastlab.training.sentence.train` each sets.
CLI_PATHS = {
    "--backbone": "backbone_dir",
    "--corpus": "corpus_path",
    "--dev-data-dir": "dev_data_dir",
    "--out": "out_dir",
    "--log": "log_path",
    "--state-dir": "state_dir",
}


def cli(argv: list[str] | None = None) -> dict[str, Any]:
    """``python scripts/train.py --help``: train one sentence cell outside the workflow (for debugging),
    print its best dev score, step, steps and timings; returns the training summary."""
    parser = argparse.ArgumentParser(description="Train one sentence-embedding cell (contrastlab.training).")
    for flag, keyword in CLI_PATHS.items():
        parser.add_argument(flag, required=True, dest=keyword, help=f"train(..., {keyword}=...)")
    parser.add_argument("--cache-dir", default=None, help="tokenised corpus cache (default resources/cache)")
    parser.add_argument(
        "--events-dir", default=None, help="TensorBoard run folder (default <state-dir>.tensorboard)"
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    parser.add_argument("--settings", default="{}", help="TrainSettings fields as one JSON object")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="one field, e.g. lr=3e-5"
    )
    args = vars(parser.parse_args(argv))
    values = json.loads(args.pop("settings"))
    for item in args.pop("set"):
        key, _, value = item.partition("=")
        try:
            values[key] = json.loads(value)
        except json.JSONDecodeError:  # a bare string, e.g. precision=fp32
            values[key] = value
    summary = train(TrainSettings.from_dict(values), **args)
    shown = {k: summary[k] for k in ("best_dev_spearman", "best_step", "steps", "timings")}
    print(json.dumps(shown, indent=1))
    return summary


def _diverging_is_a_result(
    run: Callable[[], Any],
    point: bool,
    settings: Mapping[str, Any],
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
) -> str:
    try:
        run()
    except NonFiniteLossError as error:
        if not point:
            raise  # a configured cell that diverges is a failure
        message = " ".join(str(error).split())
        print(f"point: training diverged, recorded without a score: {message}")
        record_diverged(out_dir, log_path, settings, message)
        # its snapshots would only resume into the same divergence
        shutil.rmtree(state_dir, ignore_errors=True)
        return "diverged"
    return "trained"
