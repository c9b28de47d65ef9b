"""The sentence trainer's model selection: STS dev Spearman every ``eval_every`` steps, the best checkpoint
kept (protocol.md §2; :class:`~contrastlab.training.dev.DevEvaluator` computes the scores).

A new best is kept as a device-to-device copy of the weights (no host sync, no file), written to the
state folder only with the next snapshot, in its background write and before the snapshot that refers to
it (:meth:`DevSelection.attached`), and at the end (:meth:`DevSelection.write_pending`): at most one
checkpoint per snapshot, not one per evaluation. A kill between two snapshots loses the copy with the
steps; the resumed run redoes them and finds the same best again.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from contrastlab.artifacts import hash_when_written
from contrastlab.training import state as st
from contrastlab.training.runtime import TrainingRun

__all__ = ["DevSelection", "save_checkpoint"]


def save_checkpoint(model: nn.Module, tokenizer: Any, folder: Path, weights=None) -> None:
    """The Hugging Face folder of ``model`` (its config and ``weights``, by default its own state) and
    the tokenizer's files. The weights' sha256 is taken in the background from here on
    (:func:`~contrastlab.artifacts.hash_when_written`): the record made when the job ends, of the
    export that hard-links these files, need not read them back."""
    model.save_pretrained(folder, state_dict=weights)
    for file in sorted(Path(folder).glob("*.safetensors")):
        hash_when_written(file)
    tokenizer.save_pretrained(folder)


class DevSelection:
    """STS dev evaluations every ``eval_every`` steps (``s``: the run's TrainSettings); the best one's
    weights kept (never step 0's), written with the snapshots and at the end."""

    def __init__(self, s, run: TrainingRun, evaluator, model, head, tokenizer) -> None:
        self.s, self.run, self.evaluator = s, run, evaluator
        self.model, self.head, self.tokenizer = model, head, tokenizer
        self.best, self.best_step, self.evals = -math.inf, None, []
        self.seconds: list[float] = []  # each evaluation's time, in the order of ``evals``
        self.pending: dict[str, torch.Tensor] | None = None  # the best's weights, not yet on disk

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "evals": self.evals, "eval_s": self.seconds}

    def restore(self, saved: dict[str, Any]) -> None:
        """Take up a snapshot's selection; only its best checkpoint is kept on disk."""
        self.best, self.best_step, self.evals = saved["best"], saved["best_step"], saved["evals"]
        self.seconds = list(saved.get("eval_s", []))  # snapshots of earlier versions had none
        self.pending = None
        st.prune_best(self.run.state_dir, {self.best_step} - {None})

    def __call__(self, step: int) -> dict[str, Any]:
        """Evaluate, keep the weights if they are the best so far (never at step 0), log the record."""
        t = time.perf_counter()
        with self.run.pause("eval_s"):
            dev_head = self.head if self.s.dev_pooling == "cls_mlp" else None
            record = {"event": "eval", "step": step, "dev_task": self.s.dev_task}
            record.update(self.evaluator(self.model, dev_head))
            self.evals.append({k: v for k, v in record.items() if k != "event"})
            if step > 0:
                if record["dev_spearman"] > self.best:
                    self.best, self.best_step = record["dev_spearman"], step
                    self.pending = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                record.update(best_dev_spearman=self.best, best_step=self.best_step)
            self.seconds.append(time.perf_counter() - t)
            self.run.log.write({**record, "seconds": self.seconds[-1]})
            if step > 0:
                keys = ("step", "dev_spearman", "dev_align", "dev_uniformity")
                self.run.write(json.dumps({k: record[k] for k in keys}))
        return record

    def for_snapshot(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`TrainingRun.save_snapshot` for this selection: the best weights
        not yet on disk copied along with the training state (``attached``) and written first in the
        snapshot's background write (the snapshot refers to them), and, once the snapshot is on disk,
        every other best checkpoint removed (``after``)."""
        step, state_dir = self.best_step, self.run.state_dir
        attached = {} if self.pending is None else {"best": self.pending}
        self.pending = None  # in the snapshot's copy from here on

        def write_attached(host: dict[str, Any]) -> None:
            if "best" in host:
                st.save_best(state_dir, step, lambda folder: self._save(folder, host["best"]))

        def after() -> None:
            st.prune_best(state_dir, {step} - {None})

        return {"attached": attached, "write_attached": write_attached, "after": after}

    def write_pending(self) -> None:
        """At the end of the run: the best checkpoint on disk (after the last snapshot's write)."""
        if self.pending is not None:
            weights = {k: v.cpu() for k, v in self.pending.items()}
            st.save_best(self.run.state_dir, self.best_step, lambda folder: self._save(folder, weights))
            self.pending = None

    def _save(self, folder: Path, weights: dict[str, torch.Tensor]) -> None:
        save_checkpoint(self.model, self.tokenizer, folder, weights)
