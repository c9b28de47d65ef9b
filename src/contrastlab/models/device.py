"""Where a model runs: the one device rule that the text and image encoders, the trainers and the
evaluators share."""

from __future__ import annotations

import torch


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
