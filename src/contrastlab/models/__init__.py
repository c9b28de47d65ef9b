"""Encoders: the text backbones (:mod:`.text`) and the image encoders (:mod:`.vision`).

:mod:`.text` resolves a config's backbone alias to a Hugging Face folder, loads it and turns it into
an ``encode(list[str])`` function; its names are importable from here (``from contrastlab.models
import load_backbone``), with :func:`~.device.pick_device`. :mod:`.vision` holds the CIFAR- and
ImageNet-stem ResNets and the projection head; it imports torchvision, so it is imported by name
(``from contrastlab.models.vision import build_encoder``), never from here.
"""

from __future__ import annotations

from contrastlab.models.device import pick_device
from contrastlab.models.text import (
    FIRST_LAST_POOLINGS,
    POOLINGS,
    load_backbone,
    make_encoder,
    materialize_backbone,
    package_model_dir,
    pool,
)

__all__ = [
    "FIRST_LAST_POOLINGS",
    "POOLINGS",
    "load_backbone",
    "make_encoder",
    "materialize_backbone",
    "package_model_dir",
    "pick_device",
    "pool",
]
