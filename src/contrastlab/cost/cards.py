"""GPU cards as the plan prices them, stated once: their data-sheet peaks, the precisions a card has no
units for (and so runs as another), whether it computes bf16 natively, and which card a device name is.
"""

from __future__ import annotations

#: Dense peak TFLOP/s per GPU model (the data sheets' tensor figures are with 2:4 sparsity; dense is
#: half), keyed by the words of the CUDA device name that tell the model apart: the PCIe and NVL cards
#: of a family have lower clocks and power than its SXM card, which the family's bare name means
#: (torch names an H100 SXM "NVIDIA H100 80GB HBM3").
GPU_PEAKS = {
    card: dict(zip(("fp32", "tf32", "bf16", "fp16", "source"), peaks, strict=True))
    for card, *peaks in [
        ("H100 PCIe", 51.0, 378.0, 756.5, 756.5, "NVIDIA H100 PCIe data sheet"),
        ("H100 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H100 NVL data sheet"),
        ("H100", 67.0, 495.0, 989.0, 989.0, "NVIDIA H100 SXM5 data sheet"),
        ("H200 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H200 NVL data sheet"),
        ("H200", 67.0, 495.0, 989.0, 989.0, "NVIDIA H200 SXM data sheet"),
        # The A100's PCIe and SXM cards share their peaks.
        ("A100", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 data sheet"),
        ("L40S", 91.6, 183.0, 362.05, 362.05, "NVIDIA L40S data sheet"),
        # No TF32 or bf16 units before Ampere: torch runs tf32 as fp32 there, and bf16 without tensor
        # cores (RUNS_AS prices both as the card's fp32). V100 SXM2 and P100 SXM2 figures.
        ("V100", 15.7, 15.7, 15.7, 125.0, "NVIDIA V100 data sheet"),
        ("P100", 10.6, 10.6, 10.6, 21.2, "NVIDIA P100 data sheet"),
    ]
}
#: The precisions a card has no units for, and what they run as there.
RUNS_AS = {"V100": {"tf32": "fp32", "bf16": "fp32"}, "P100": {"tf32": "fp32", "bf16": "fp32"}}

#: The card a plan is priced for when ``resources.gpu_model`` is null: the one measured end to end.
DEFAULT_GPU_MODEL = "H200"


def model_of(device_name: str) -> str | None:
    """The card of :data:`GPU_PEAKS` that ``device_name`` (a CUDA device name, or a card's name such as
    ``a100``) is: the most specific one whose words all appear in it ("H100 PCIe" before "H100")."""
    words = device_name.upper().replace("-", " ").split()
    for model in sorted(GPU_PEAKS, key=lambda m: -len(m.split())):
        if all(word.upper() in words for word in model.split()):
            return model
    return None


def native_bf16(card: str | None) -> bool:
    """Whether ``card`` (a :data:`GPU_PEAKS` name or a CUDA device name; None: :data:`DEFAULT_GPU_MODEL`)
    computes bf16 natively: it has bf16 units, so bf16 does not run as another precision there
    (:data:`RUNS_AS`). The cards without are those before Ampere (compute capability below 8.0), where
    ``precision: auto`` trains in fp32. A card not listed is taken to have them.

    >>> native_bf16(None), native_bf16("A100"), native_bf16("Tesla V100-SXM2-32GB")
    (True, True, False)
    """
    model = model_of(card) if card else DEFAULT_GPU_MODEL
    return "bf16" not in RUNS_AS.get(model or "", {})
