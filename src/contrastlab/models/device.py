"""Where a model runs: the one device rule that the text and image encoders, the trainers and the
evaluators share, and the one way a host batch reaches it."""

from __future__ import annotations

import torch


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def host_to_device(data, device: torch.device) -> torch.Tensor:
    """``data`` (a host tensor or numpy array) on ``device``; to CUDA through page-locked memory without
    blocking: a pageable copy makes the host wait for the GPU's queue (docs/gpu-defects.md, G10), and the
    copy is ordered before the kernels that read it."""
    tensor = torch.as_tensor(data)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
