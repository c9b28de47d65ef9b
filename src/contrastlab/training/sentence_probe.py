"""The sentence trainer's geometry probe (``analysis_every``): the statistics of
:mod:`contrastlab.training.geometry` on a fixed probe of corpus sentences, and on the dev split's, at step
0, every ``analysis_every`` steps and at the last step. ``s`` is the run's ``TrainSettings``, ``data`` its
tokenised corpus (``training.sentence``)."""

from __future__ import annotations

import numpy as np
import torch

from contrastlab.training import geometry
from contrastlab.training.runtime import TrainingRun
from contrastlab.training.sentence_step import embed_pairs, to_device

__all__ = ["GeometryProbe", "probe_batches"]


class GeometryProbe:
    """Geometry statistics of a probe (training.geometry) at step 0, every ``analysis_every`` steps and
    at the last step, logged; off (and free) unless ``analysis_every`` is set."""

    def __init__(self, s, run: TrainingRun, data, evaluator, model, head) -> None:
        self.s, self.run, self.model, self.head = s, run, model, head
        pad_id = data.tokenizer.pad_token_id
        self.probe = probe_batches(s, data.sentences, data.n_sentences, pad_id, run.device)
        self.dev_probe = (
            evaluator.probe_batches(s.analysis_batch, s.analysis_sentences, s.seed) if self.probe else []
        )
        self.info = {
            "probe_sentences": sum(ids.shape[0] for ids, _ in self.probe),
            "probe_heldout": s.analysis_holdout,
        }

    def __call__(self, step: int) -> None:
        """A forked, (seed, step)-seeded RNG draws the probe's dropout masks: training is unchanged."""
        if not self.probe:
            return
        run, s = self.run, self.s
        with run.pause("analysis_s"):
            devices = [run.device] if run.device.type == "cuda" else []

            def embed(ids, mask):
                return embed_pairs(self.model, self.head, ids, mask, run.autocast, s.head_autocast)

            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(s.seed * 1_000_003 + step)
                stats = geometry.probe_statistics(embed, self.probe)
                # The dev split's sentences with the same dropout views: Nie's dev-set L_cl.
                dev_stats = geometry.probe_statistics(embed, self.dev_probe) if self.dev_probe else {}
            keep = ("l_cl", "align", "uniformity", "d_gap", "cos_pos", "cos_neg")
            dev_part = {f"dev_{k}": dev_stats[k] for k in keep if k in dev_stats}
            run.log.write({"event": "geometry", "step": step, **self.info, **stats, **dev_part})


def probe_batches(s, corpus, n_sentences: int, pad_id: int, dev: torch.device) -> list:
    """The probe's ``(input_ids, attention_mask)`` batches on ``dev``: the corpus's last
    ``analysis_sentences`` (held out of training) or, without ``analysis_holdout``, its first ones
    (training sentences, as Nie's train-set curves); [] when the analysis is off."""
    if not s.analysis_every:
        return []
    if s.analysis_holdout:
        rows = np.arange(len(corpus) - s.analysis_sentences, len(corpus))
    else:
        rows = np.arange(min(s.analysis_sentences, n_sentences))
    if len(rows) < s.analysis_batch:
        raise ValueError(
            f"the analysis probe has {len(rows)} sentences, fewer than one batch of {s.analysis_batch}; "
            "lower analysis_batch"
        )
    whole = len(rows) // s.analysis_batch * s.analysis_batch  # full batches only: N fixes the statistics
    return [
        to_device(*corpus.batch(part, pad_id), dev)
        for part in np.split(rows[:whole], whole // s.analysis_batch)
    ]
