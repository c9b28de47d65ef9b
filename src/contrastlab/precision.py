"""The fp32 switches of PyTorch's CUDA backends, set in one place.

Training (:class:`contrastlab.training.runtime.Precision`) turns TF32 on for the steps of a ``tf32`` run
only; everything that measures (SentEval encoding, image features and spectra) runs under
:func:`ieee_fp32`. Without these, PyTorch's own defaults apply: IEEE fp32 matmuls but TF32 cuDNN
convolutions, so an "fp32" evaluation of an image encoder would be TF32 on Ampere and later GPUs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def set_fp32_mode(mode: str) -> None:
    """``ieee`` or ``tf32`` for cuBLAS matmuls and cuDNN convolutions and RNNs (PyTorch's fp32_precision
    API; the legacy ``allow_tf32`` flags are never set: mixing the two APIs is an error in PyTorch 2.14).
    No model here has an RNN; its switch follows so that the cuDNN switches never disagree (PyTorch
    2.14's legacy ``cudnn.allow_tf32`` getter raises when they do, and on ``ieee`` in any case)."""
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode
    torch.backends.cudnn.rnn.fp32_precision = mode


@contextlib.contextmanager
def ieee_fp32() -> Iterator[None]:
    """IEEE fp32 matmuls and convolutions inside, the previous switches restored after: evaluation
    (SentEval encoding, image features, spectra) is fp32 whatever PyTorch's defaults (cuDNN convolutions
    in TF32) or a caller set. Usable as a decorator."""
    before = (
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,
        torch.backends.cudnn.rnn.fp32_precision,
    )
    set_fp32_mode("ieee")
    try:
        yield
    finally:
        (
            torch.backends.cuda.matmul.fp32_precision,
            torch.backends.cudnn.conv.fp32_precision,
            torch.backends.cudnn.rnn.fp32_precision,
        ) = before


def fp32_mode_now() -> dict[str, str]:
    """The current fp32 switches (tests and the run record read them)."""
    return {
        "matmul": torch.backends.cuda.matmul.fp32_precision,
        "conv": torch.backends.cudnn.conv.fp32_precision,
    }
