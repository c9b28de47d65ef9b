"""The image trainer's step (training.vision_step): OAR's labelled term reads nothing back from the
device once its labels were checked (its CUDA twin is in test_vision.py)."""

from __future__ import annotations

import contextlib

import torch

from contrastlab.losses import build_loss
from contrastlab.losses.oar import orthonormal_anchors
from contrastlab.models.vision import build_encoder
from contrastlab.training.vision_step import OarBatch, train_step


def test_the_oar_step_reads_nothing_back_from_the_device_once_its_labels_were_checked(monkeypatch):
    """Defect 14 (docs/gpu-defects.md): no device read in the step, counted on the CPU."""
    torch.manual_seed(0)
    encoder = build_encoder("resnet18", stem="cifar", width=4)
    anchors = orthonormal_anchors(10, encoder.feature_dim, generator=torch.Generator().manual_seed(0))
    views = torch.randn(4, 3, 16, 16)
    reads = []
    for name in ("__bool__", "item", "tolist"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(
            torch.Tensor, name, lambda t, *a, _f=original, _n=name: reads.append(_n) or _f(t, *a)
        )

    def step(checked: bool) -> int:
        reads.clear()
        oar = OarBatch(views, views, torch.tensor([0, 1, 2, 9]), anchors, 1.0, labels_checked=checked)
        options = dict(
            autocast=contextlib.nullcontext, memory_format=torch.contiguous_format, with_stats=False
        )
        train_step(
            encoder, torch.nn.Identity(), build_loss("ntxent", tau=1.0), views, views, **options, oar=oar
        )
        return len(reads)

    assert step(checked=False) >= 2  # the check, once per view: the counter sees it
    assert step(checked=True) == 0
