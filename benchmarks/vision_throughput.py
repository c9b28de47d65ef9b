"""Training throughput of the vision trainer's step: images/s and seconds per CIFAR-sized epoch.

Times ``contrastlab.training.vision.train_step`` exactly as the trainer runs it: a batch of uint8
images already on the device, two SimCLR views drawn per image on the device (augmentation included),
both views through the CIFAR ResNet-18 (3x3 stem, no max-pool, width 64) and the MLP head in one
forward pass, NT-Xent over the 2N batch, backward, Adam (fused on CUDA); bf16 autocast and
channels-last on CUDA, fp32 on a CPU. Images are random uint8 of CIFAR's shape (the speed does not
depend on their content). An epoch is 50,000 images (CIFAR-10's training split) = 50000 // batch steps.

    python benchmarks/vision_throughput.py                       # CUDA when available, else CPU
    python benchmarks/vision_throughput.py --device cpu --steps 2 --warmup 1
    python benchmarks/vision_throughput.py --compile             # also torch.compile'd (CUDA)
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from contrastlab.data.images import IMAGE_STATS
from contrastlab.losses import build_loss
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.training.sentence import autocast_for, device_name, resolve_precision
from contrastlab.training.vision import VisionTrainSettings, effective_lr, train_step

CIFAR_TRAIN_IMAGES = 50_000


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    device: torch.device, batch_size: int, steps: int, warmup: int, compile_model: bool, precision: str
) -> dict:
    torch.manual_seed(0)
    # The trainer's defaults (MACL App. B.3): CIFAR ResNet-18, width 64, head 512 -> 128, Adam.
    s = VisionTrainSettings(batch_size=batch_size, loss="ntxent", loss_hp={"tau": 0.1})
    precision = resolve_precision(precision, device)
    memory_format = torch.channels_last if device.type == "cuda" else torch.contiguous_format
    encoder = build_encoder(s.arch, stem=s.stem, width=s.width).to(device, memory_format=memory_format)
    head = ProjectionHead(encoder.feature_dim, s.head_hidden, s.head_dim).to(device).train()
    model_encoder = torch.compile(encoder.train()) if compile_model else encoder.train()
    optimizer = torch.optim.Adam(
        [*encoder.parameters(), *head.parameters()],
        lr=effective_lr(s),
        weight_decay=s.weight_decay,
        fused=device.type == "cuda" or None,
    )
    loss_fn = build_loss(s.loss, **s.loss_hp)
    augment = s.augment(32, *IMAGE_STATS["cifar10"])
    images = torch.randint(0, 256, (batch_size, 3, 32, 32), dtype=torch.uint8, device=device)
    views = torch.Generator(device=device).manual_seed(0)
    autocast = autocast_for(precision, device)

    def step():
        train_step(
            model_encoder,
            head,
            loss_fn,
            optimizer,
            augment(images, views),
            augment(images, views),
            autocast=autocast,
            memory_format=memory_format,
            with_stats=False,
        )

    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    step_s = (time.perf_counter() - t0) / steps
    # The augmentation alone (two views), for the share of the step it costs.
    t0 = time.perf_counter()
    for _ in range(steps):
        augment(images, views), augment(images, views)
    _sync(device)
    augment_s = (time.perf_counter() - t0) / steps
    steps_per_epoch = CIFAR_TRAIN_IMAGES // batch_size
    return {
        "device": device_name(device),
        "precision": precision,
        "compile": compile_model,
        "batch_size": batch_size,
        "steps_timed": steps,
        "step_s": round(step_s, 4),
        "augment_share": round(augment_s / step_s, 3),
        "images_per_s": round(batch_size / step_s, 1),
        "epoch_s": round(step_s * steps_per_epoch, 2),
        "epoch_note": f"{steps_per_epoch} steps x measured step time"
        + (" (extrapolated from a few CPU steps)" if device.type == "cpu" else ""),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        if device.type == "cuda"
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda (default: cuda if available)")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 30 on CUDA, 2 on CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 10 / 1)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument(
        "--compile", action="store_true", help="also measure with torch.compile on the encoder"
    )
    args = parser.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    steps = args.steps or (30 if device.type == "cuda" else 2)
    warmup = args.warmup if args.warmup is not None else (10 if device.type == "cuda" else 1)
    runs = [False, True] if args.compile else [False]
    for compile_model in runs:
        print(
            json.dumps(measure(device, args.batch_size, steps, warmup, compile_model, args.precision)),
            flush=True,
        )


if __name__ == "__main__":
    main()
