"""Model selection during training: STS dev Spearman (plus alignment and uniformity) on the device.

The dev sentences are tokenised once, sorted by length into padded batches with the 4D attention mask
(no host sync per batch) and kept on the training device, so an evaluation is a few forward passes and
one host transfer of the cosines. It runs in IEEE fp32 without autocast whatever the training precision
(the papers' model selection). ``batch_size`` 512 is the GPU's setting; a CPU's 128 keeps its scores
bit-equal to earlier runs. The score is the one ``contrastlab.evaluation.senteval.evaluate(...,
mode="dev")`` reports for the same task (raw [CLS], no truncation, cosine, Spearman in percent);
alignment = mean ‖z − z'‖² over pairs with gold score ≥ 4 and uniformity = log mean exp(−2‖z_a − z_b‖²)
over pairs of distinct dev sentences (protocol.md §4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from contrastlab.models.text import attention_bias
from contrastlab.senteval.tasks import load_sts_split

POSITIVE_GOLD = 4.0  # protocol.md §4: pairs with gold score >= 4 are the "positive pairs" of alignment


class DevEvaluator:
    """Callable ``evaluator(model, head=None) -> {"dev_spearman", "dev_align", "dev_uniformity"}``.

    With ``head``, the dev embedding is the [CLS] vector through it (Nie et al.'s model selection,
    ``dev_pooling: cls_mlp``); without, the raw [CLS]."""

    def __init__(
        self,
        data_dir: str | Path,
        task: str,
        tokenizer: Any,
        device: torch.device,
        *,
        batch_size: int = 128,
    ) -> None:
        sentences1, sentences2, gold = load_sts_split(data_dir, task, "dev")
        unique = sorted(set(sentences1) | set(sentences2))
        index = {sentence: i for i, sentence in enumerate(unique)}
        encoded = tokenizer(unique, truncation=False)["input_ids"]
        order = sorted(range(len(unique)), key=lambda i: len(encoded[i]))
        self._encoded, self._pad_id, self.device = encoded, tokenizer.pad_token_id, device
        self.batches = [
            self._padded(order[start : start + batch_size]) for start in range(0, len(order), batch_size)
        ]
        self._unsort = torch.from_numpy(np.argsort(order)).to(device)  # batch order -> sentence order
        self.left = torch.tensor([index[s] for s in sentences1], device=device)
        self.right = torch.tensor([index[s] for s in sentences2], device=device)
        self.gold = np.asarray(gold, dtype=np.float64)
        # Row indices, not a boolean mask: boolean indexing asks the device for the count (a sync).
        self.positive = torch.from_numpy(np.flatnonzero(self.gold >= POSITIVE_GOLD)).to(device)

    def _padded(self, rows) -> tuple[torch.Tensor, torch.Tensor]:
        """The sentences ``rows`` as ``(input_ids, attention_mask)`` on the device, as wide as the longest."""
        rows_ids = [torch.tensor(self._encoded[i], dtype=torch.long) for i in rows]
        ids = pad_sequence(rows_ids, batch_first=True, padding_value=self._pad_id)
        mask = pad_sequence([torch.ones_like(x) for x in rows_ids], batch_first=True)
        return ids.to(self.device), mask.to(self.device)

    def probe_batches(
        self, batch_size: int, max_sentences: int, seed: int
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Up to ``max_sentences`` unique dev sentences in an order drawn from ``seed``, as full padded
        ``(input_ids, attention_mask)`` batches of ``batch_size`` on the device: the dev side of the
        trainer's geometry probe (Nie Fig. 1b-d's dev L_cl). [] if the split has fewer than one batch."""
        order = np.random.default_rng([seed, 1]).permutation(len(self._encoded))[:max_sentences]
        starts = range(0, len(order) - batch_size + 1, batch_size)
        return [self._padded(order[start : start + batch_size]) for start in starts]

    @torch.inference_mode()
    def embeddings(self, model: torch.nn.Module, head: torch.nn.Module | None = None) -> torch.Tensor:
        """Last-layer [CLS] vectors (float32) of the unique dev sentences, through ``head`` if given;
        model and head in eval mode."""
        modules = [module for module in (model, head) if module is not None]
        were_training = [module.training for module in modules]
        for module in modules:
            module.eval()
        try:
            embedded = []
            for ids, mask in self.batches:
                cls = model(input_ids=ids, attention_mask=attention_bias(model, mask)).last_hidden_state[:, 0]
                embedded.append((cls if head is None else head(cls)).float())
            return torch.cat(embedded)[self._unsort]
        finally:
            for module, was_training in zip(modules, were_training, strict=True):
                module.train(was_training)

    def __call__(self, model: torch.nn.Module, head: torch.nn.Module | None = None) -> dict[str, float]:
        z = F.normalize(self.embeddings(model, head), dim=-1)
        left, right = z[self.left], z[self.right]
        cosine = (left * right).sum(-1)
        align = (left[self.positive] - right[self.positive]).pow(2).sum(-1).mean()
        uniformity = torch.pdist(z, p=2).pow(2).mul(-2).exp().mean().log()
        values = torch.cat([torch.stack([align, uniformity]), cosine]).double().cpu().numpy()  # one sync
        # Imported here: the image cells' train jobs import this module through training.cells and never
        # score STS, and scipy.stats is two seconds of every job's start.
        from scipy.stats import spearmanr

        spearman = spearmanr(values[2:], self.gold).statistic
        return {
            "dev_spearman": float(spearman) * 100.0,
            "dev_align": float(values[0]),
            "dev_uniformity": float(values[1]),
        }
