"""One step of the image trainer (:mod:`contrastlab.training.vision`): both augmented views through the
encoder in one forward pass, the head, the loss, and OAR's labelled term (OAR §4) when the cell has one.
The optimiser step is the caller's; ``benchmarks/vision_throughput.py`` times exactly this and that step,
and :mod:`contrastlab.training.vision_capture` captures it whole."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from contrastlab.losses.oar import oar_loss

__all__ = ["OarBatch", "train_step"]


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
    encoder in one forward pass of 2B images under ``autocast`` (BatchNorm sees the whole 2N batch), the
    head in fp32 (inside autocast with ``head_autocast``), the loss on the halves; with ``oar``, its
    labelled views in a second pass and ``weight`` x the OAR term added (OAR §4). ``scale`` maps the
    total loss to what is back-propagated (fp16 loss scaling). The optimiser step is the caller's
    (:meth:`~contrastlab.training.runtime.TrainingRun.optimizer_step`). Returns (loss output, h1, h2,
    OAR term or None); the benchmark times exactly this and that step."""

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
