"""One step of the image trainer (:mod:`contrastlab.training.vision`): both augmented views through the
encoder in one forward pass, the head, the loss, and OAR's labelled term (OAR §4) when the cell has one,
with its labelled batches (:class:`OarBatches`). The optimiser step is the caller's;
``benchmarks/vision_throughput.py`` times exactly this and that step, and
:mod:`contrastlab.training.vision_capture` captures it whole."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from contrastlab.data.images import NUM_CLASSES, labelled_subset
from contrastlab.losses.oar import oar_loss, orthonormal_anchors
from contrastlab.models.device import host_to_device
from contrastlab.training.augment import two_views

__all__ = ["OarBatch", "OarBatches", "labelled_order", "train_step"]


@dataclass(frozen=True)
class OarBatch:
    """A labelled batch of the OAR term: two views [B, 3, S, S], labels [B], anchors [K, D], weight."""

    view1: torch.Tensor
    view2: torch.Tensor
    labels: torch.Tensor
    anchors: torch.Tensor
    weight: float
    #: The labels were checked to lie in [0, K) when the subset was made: the step then skips the
    #: check, a host sync in every step otherwise (docs/gpu-defects.md, defect 14).
    labels_checked: bool = False


def train_step(
    encoder,
    head,
    loss_fn,
    view1,
    view2,
    *,
    autocast,
    memory_format,
    with_stats: bool,
    oar: OarBatch | None = None,
    scale=lambda loss: loss,
    head_autocast: bool = False,
):
    """Forward and backward of one batch of two augmented views [B, 3, S, S]: both views through the
    encoder in one pass of 2B images under ``autocast`` (BatchNorm sees the 2N batch), the head in fp32
    (unless ``head_autocast``), the loss on the halves; with ``oar``, its labelled views in a second pass
    and ``weight`` x the OAR term added (OAR §4). ``scale`` maps the loss to what is back-propagated (fp16
    loss scaling). Returns (loss output, h1, h2, OAR term or None); the optimiser step is the caller's."""

    def embed(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([a, b]).contiguous(memory_format=memory_format)
        with autocast():
            features = encoder(x)
            if head_autocast:
                features = head(features)
        return (features if head_autocast else head(features.float())).float().chunk(2)

    h1, h2 = embed(view1, view2)
    out = loss_fn(h1, h2, with_stats=with_stats)
    total, oar_value = out.loss, None
    if oar is not None:
        z1, z2 = embed(oar.view1, oar.view2)
        oar_value = oar_loss(z1, z2, oar.labels, oar.anchors, check_labels=not oar.labels_checked)
        total = total + oar.weight * oar_value
    scale(total).backward()
    return out, h1, h2, oar_value


class OarBatches:
    """The labelled batches of the OAR term: a fixed labelled subset (``oar_fraction`` of the training
    split, nested across fractions), cycled independently of the epochs (the authors' max_size_cycle),
    and anchors drawn from the seed on the CPU in float64 (the same on every device). ``s``: the run's
    ``VisionTrainSettings``; ``data``: its training split (``labels``)."""

    def __init__(self, s, data, loss_dim: int, device: torch.device) -> None:
        self.s = s
        subset = labelled_subset(len(data.labels), s.oar_fraction, s.seed)
        self.labelled = subset.to(device)
        self.labels = data.labels.to(device)
        self.batch_size = min(s.oar_batch_size or s.batch_size, len(self.labelled))
        self.steps_per_cycle = len(self.labelled) // self.batch_size
        generator = torch.Generator().manual_seed(s.seed)
        self.anchors = orthonormal_anchors(NUM_CLASSES[s.dataset], loss_dim, generator=generator).to(device)
        self.cycle, self.order = -1, torch.empty(0, dtype=torch.long)
        labelled = data.labels[subset]
        if len(labelled) and not (0 <= int(labelled.min()) and int(labelled.max()) < len(self.anchors)):
            raise ValueError(
                f"{s.dataset}: labels of the labelled subset must be in [0, {len(self.anchors)})"
            )

    def batch(self, step: int, images: torch.Tensor, augment, views: torch.Generator) -> OarBatch:
        cycle, position = divmod(step - 1, self.steps_per_cycle)
        if cycle != self.cycle:
            order = labelled_order(len(self.labelled), self.s.seed, cycle)
            self.cycle, self.order = cycle, self.labelled[host_to_device(order, self.labelled.device)]
        rows = self.order[position * self.batch_size : (position + 1) * self.batch_size]
        view1, view2 = two_views(augment, images[rows], views, self.s.augment_calls)
        return OarBatch(view1, view2, self.labels[rows], self.anchors, self.s.oar_weight, labels_checked=True)


def labelled_order(n: int, seed: int, cycle: int) -> np.ndarray:
    """The order of the labelled subset in one pass over it (independent of the main epoch order)."""
    return np.random.default_rng([seed, 0x0A4, cycle]).permutation(n)
