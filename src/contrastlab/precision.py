"""Precision, stated once: the choices a cell can ask for, the one rule that resolves them on a device,
and the fp32 switches of PyTorch's CUDA backends.

The runtime resolves a cell's choice on its device (:func:`contrastlab.training.runtime.resolve_precision`),
the plan on the card it prices (:mod:`contrastlab.cost.flops`); the schema lists the same choices (tested).
Training turns TF32 on for a ``tf32`` run's steps only; everything that measures (encoding, image
features, spectra) runs under :func:`ieee_fp32`: PyTorch's defaults would run fp32 convolutions in TF32
on Ampere and later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType

#: What a cell's ``precision`` (and ``precision_override``) may ask for.
CHOICES = ("auto", "fp32", "tf32", "bf16", "fp16")
#: What a run computes in, once ``auto`` and a CPU's ``tf32`` are resolved.
RESOLVED = ("fp32", "tf32", "bf16", "fp16")
#: Bytes of one activation element a run keeps at each resolved precision: TF32 rounds the inputs of
#: the products only, so its activations are fp32's; bf16 and fp16 autocast keep 16-bit ones.
ACTIVATION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


def resolve(requested: str, *, cuda: bool, native_bf16: bool) -> str:
    """The precision a run uses for ``requested`` (one of :data:`CHOICES`) on a device that is (or is
    not) a CUDA GPU with (or without) native bf16: ``auto`` is bf16 on a CUDA GPU with native bf16 and
    fp32 elsewhere (never emulated bf16); ``tf32`` is fp32 off CUDA (no TF32 there).

    >>> resolve("auto", cuda=True, native_bf16=True), resolve("auto", cuda=False, native_bf16=False)
    ('bf16', 'fp32')
    >>> resolve("tf32", cuda=False, native_bf16=False), resolve("fp16", cuda=False, native_bf16=False)
    ('fp32', 'fp16')
    """
    if requested not in CHOICES:
        raise ValueError(f"precision must be one of {', '.join(CHOICES)}, got {requested!r}")
    if requested == "auto":
        return "bf16" if cuda and native_bf16 else "fp32"
    if requested == "tf32" and not cuda:
        return "fp32"
    return requested


#: What each choice runs as on a CUDA GPU, by whether the card computes bf16 natively (True: an A100,
#: H100 or H200; False: a V100 or P100), by :func:`resolve`: the plan reads it as a table
#: (``contrastlab.cost.flops``).
ON_CUDA: Mapping[bool, Mapping[str, str]] = MappingProxyType(
    {
        native: MappingProxyType(
            {choice: resolve(choice, cuda=True, native_bf16=native) for choice in CHOICES}
        )
        for native in (True, False)
    }
)


def set_fp32_mode(mode: str) -> None:
    """``ieee`` or ``tf32`` for cuBLAS matmuls and cuDNN convolutions and RNNs (PyTorch's fp32_precision
    API), with PyTorch's legacy switches (``set_float32_matmul_precision``, ``cudnn.allow_tf32``) set to
    agree (the RNN switch too, so the cuDNN switches never disagree). Why both APIs: the legacy getters
    raise when the new switches disagree with them, and TorchInductor reads them while it compiles
    (docs/training-speed.md; defect N7 in docs/gpu-defects.md).
    """
    _set_legacy(mode, mode)
    for switch in _switches():
        switch.fp32_precision = mode


def _switches() -> tuple:
    """The fp32_precision switches of cuBLAS matmuls, cuDNN convolutions and cuDNN RNNs, in that order."""
    import torch  # here, not at the top: the plan and the Snakefile read CHOICES without torch

    return torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn


def _set_legacy(matmul: str, conv: str) -> None:
    """PyTorch's legacy TF32 switches to agree with the new ones (``none`` leaves a legacy switch as it
    is: the new API then defers to it)."""
    import torch

    if matmul != "none":
        torch.set_float32_matmul_precision("high" if matmul == "tf32" else "highest")
    if conv != "none":
        torch.backends.cudnn.allow_tf32 = conv == "tf32"


@contextlib.contextmanager
def ieee_fp32() -> Iterator[None]:
    """IEEE fp32 matmuls and convolutions inside, the previous switches restored after: evaluation
    (SentEval encoding, image features, spectra) is fp32 whatever PyTorch's defaults (cuDNN convolutions
    in TF32) or a caller set. Usable as a decorator."""
    before = [switch.fp32_precision for switch in _switches()]
    set_fp32_mode("ieee")
    try:
        yield
    finally:
        _set_legacy(before[0], before[1])
        for switch, mode in zip(_switches(), before, strict=True):
            switch.fp32_precision = mode


def fp32_mode_now() -> dict[str, str]:
    """The current fp32 switches (tests and the run record read them)."""
    matmul, conv, _ = _switches()
    return {"matmul": matmul.fp32_precision, "conv": conv.fp32_precision}
