"""One training step of the SimCSE-protocol sentence trainer (:mod:`contrastlab.training.sentence`).

- Heads (:func:`build_head`): ``simcse`` = Linear(d, d) + Tanh (SimCSE's ``MLPLayer``), weight ~ N(0,
  ``initializer_range``), bias 0 (SimCSE's ``cl_init``). ``li2024`` (Li et al.'s code) = Linear for
  BERT-like backbones, Tanh → Linear for RoBERTa-like ones (:data:`ROBERTA_TYPES`), weight and bias
  ~ N(0, 6e-3) (``custom_param_init``).
- Views (:func:`embed_pairs`): each batch of N sentences is encoded twice in one forward pass (rows 2i
  and 2i+1 are sentence i, as SimCSE); dropout is the only augmentation; the last-layer [CLS] vector
  goes through the head, and the loss sees ``h1, h2`` ([N, D], float32). The encoder gets the 4D
  attention mask (:func:`~contrastlab.models.text.attention_bias`: no host sync per forward).
- Micro-batches (:func:`train_step`): ``grad_accum = k`` splits the encoder's work into k micro-batches
  while the loss still sees the whole batch (gradient caching: encode without a graph, take the loss's
  gradient with respect to the embeddings, re-encode each micro-batch with the same dropout masks and
  back-propagate it). Micro-batching the loss would change the number of negatives, i.e. the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from contrastlab import families
from contrastlab.models.device import host_to_device
from contrastlab.models.text import attention_bias

__all__ = ["CLIP_NORM", "ROBERTA_TYPES", "StepParts", "build_head", "embed_pairs", "to_device", "train_step"]

#: The families whose ``li2024`` head is Tanh then Linear (:data:`contrastlab.families.TEXT_FAMILIES`).
ROBERTA_TYPES = families.text_types("roberta_like")
CLIP_NORM = 1.0  # protocol.md §2: the gradient norm clipped to 1.0
ADAMW = {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}  # protocol.md §2 (SimCSE's HF Trainer)
LI2024_HEAD_STD = 6e-3  # Li et al.'s custom_param_init: nn.init.normal_(weight and bias, 0, 6e-3)


@dataclass(frozen=True)
class StepParts:
    """What the trainer's step needs, built once per run: ``encoder`` (the model, its padding-free
    wrapper or its compiled form), the training-only ``head``, ``loss_fn``, the ``optimizer`` and the
    trainable ``params`` it clips together, and the tokenised ``corpus`` the batches come from."""

    encoder: nn.Module
    head: nn.Module
    loss_fn: Any
    optimizer: torch.optim.Optimizer
    params: list
    corpus: Any

    @property
    def step(self) -> tuple:
        """(encoder, head, loss_fn, optimizer, params): the parts one update takes
        (:func:`contrastlab.training.capture.sentence_update`)."""
        return self.encoder, self.head, self.loss_fn, self.optimizer, self.params


def build_head(
    protocol: str, model_type: str, dim: int, initializer_range: float = 0.02
) -> tuple[nn.Module, str]:
    """The training-only head of ``protocol`` and a short description of it (module docstring); draws
    from torch's global RNG (seeded by the trainer)."""
    linear = nn.Linear(dim, dim)
    if protocol == "simcse":
        nn.init.normal_(linear.weight, mean=0.0, std=initializer_range)
        nn.init.zeros_(linear.bias)
        return nn.Sequential(linear, nn.Tanh()), f"linear+tanh(std {initializer_range:g})"
    nn.init.normal_(linear.weight, mean=0.0, std=LI2024_HEAD_STD)
    nn.init.normal_(linear.bias, mean=0.0, std=LI2024_HEAD_STD)
    if model_type in ROBERTA_TYPES:
        return nn.Sequential(nn.Tanh(), linear), "tanh+linear(std 6e-3)"
    return nn.Sequential(linear), "linear(std 6e-3)"


def embed_pairs(
    model: nn.Module, head: nn.Module, ids: torch.Tensor, mask: torch.Tensor, autocast, head_autocast=False
):
    """Both dropout views of a batch in one forward pass: ``(h1, h2)``, float32 [N, D]. The encoder runs
    under ``autocast``; the head too only with ``head_autocast`` (else in fp32 on the fp32 [CLS])."""
    mask = attention_bias(model, mask.repeat_interleave(2, dim=0))
    with autocast():
        cls = model(input_ids=ids.repeat_interleave(2, dim=0), attention_mask=mask).last_hidden_state[:, 0]
        if head_autocast:
            cls = head(cls)
    h = cls if head_autocast else head(cls.float())
    h = h.float().view(ids.shape[0], 2, -1)
    return h[:, 0], h[:, 1]


def _rng_state(device: torch.device) -> torch.Tensor:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def _set_rng_state(device: torch.device, state: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def train_step(
    model, head, loss_fn, chunks, *, autocast, with_stats: bool, scale=lambda loss: loss, head_autocast=False
):
    """Forward + backward of one batch given as encoder micro-batches ``[(ids, mask), ...]``.

    Returns the loss output and the detached embeddings. With one chunk this is the plain step; with
    more, gradient caching (module docstring) so that the loss sees the whole batch. ``scale`` maps
    the loss to what is back-propagated (fp16's loss scaling; identity otherwise).
    """
    if len(chunks) == 1:
        h1, h2 = embed_pairs(model, head, *chunks[0], autocast, head_autocast)
        out = loss_fn(h1, h2, with_stats=with_stats)
        scale(out.loss).backward()
        return out, h1.detach(), h2.detach()
    device = chunks[0][0].device
    rng_states, views = [], []
    with torch.no_grad():
        for ids, mask in chunks:
            rng_states.append(_rng_state(device))
            views.append(embed_pairs(model, head, ids, mask, autocast, head_autocast))
    h1 = torch.cat([v[0] for v in views]).requires_grad_()
    h2 = torch.cat([v[1] for v in views]).requires_grad_()
    out = loss_fn(h1, h2, with_stats=with_stats)
    scale(out.loss).backward()
    sizes = [ids.shape[0] for ids, _ in chunks]
    after = _rng_state(device)
    for (ids, mask), rng, g1, g2 in zip(
        chunks, rng_states, h1.grad.split(sizes), h2.grad.split(sizes), strict=True
    ):
        _set_rng_state(device, rng)
        c1, c2 = embed_pairs(model, head, ids, mask, autocast, head_autocast)
        torch.autograd.backward([c1, c2], [g1, g2])
    _set_rng_state(device, after)
    return out, h1.detach(), h2.detach()


def to_device(
    ids: torch.Tensor, mask: torch.Tensor, device: torch.device, *, host_mask: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch on ``device`` (:func:`~contrastlab.models.device.host_to_device`). With
    ``host_mask`` the mask stays on the host (the padding-free encoder's, :mod:`contrastlab.models.packed`:
    its gather indices are built from the host copy, with no host sync)."""
    return host_to_device(ids, device), (mask if host_mask else host_to_device(mask, device))
