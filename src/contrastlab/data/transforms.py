"""Image tensors for the encoders: to float in [0, 1], normalised per channel, resized for evaluation.

Shared by the vision trainer's batch augmentations (:mod:`contrastlab.training.augment`, which ends
each augmentation with :func:`to_unit` and :func:`normalize` as torchvision's ``ToTensor`` and
``Normalize``) and by the evaluation of a trained encoder (:func:`eval_transform`), so both see images
prepared the same way without evaluation importing the training package.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["constant", "eval_transform", "normalize", "to_unit"]


@functools.lru_cache(maxsize=64)
def constant(values: tuple, device: torch.device, dtype: torch.dtype) -> Tensor:
    """A small constant tensor, made once per device: ``torch.tensor(..., device="cuda")`` copies from
    host memory and waits for the stream, which would stall the trainer's queue of GPU work each step.
    Callers never modify it."""
    return torch.tensor(values, device=device, dtype=dtype)


def to_unit(images: Tensor) -> Tensor:
    """float32 in [0, 1]: uint8 divided by 255 (``ToTensor``), float passed through."""
    return images.to(torch.float32).div_(255.0) if images.dtype == torch.uint8 else images.to(torch.float32)


def normalize(x: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """``(x - mean) / std`` per channel, as torchvision's ``normalize``."""
    m = constant(tuple(mean), x.device, x.dtype).reshape(1, -1, 1, 1)
    s = constant(tuple(std), x.device, x.dtype).reshape(1, -1, 1, 1)
    return (x - m) / s


def eval_transform(images: Tensor, *, size: int, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """Images for feature extraction: to float in [0, 1], resized to ``size`` x ``size`` if needed
    (bilinear with antialias, torchvision's ``Resize`` default), normalised; float32 [B, 3, size, size]."""
    x = to_unit(images)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return normalize(x, mean, std).contiguous()
