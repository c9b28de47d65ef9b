"""Training throughput of the vision trainer's step: images/s and seconds per CIFAR-sized epoch.

Times ``contrastlab.training.vision.train_step`` and the runtime's optimiser step exactly as the
trainer runs them: a batch of uint8 images already on the device, two SimCLR views drawn per image on
the device (augmentation included), both views through the encoder in one forward pass, the head (if
any) in fp32, the loss, backward, the optimiser step (fused on CUDA); the precision's autocast and TF32
switches and channels-last on CUDA, as ``contrastlab.training.runtime`` sets them. Images are random
uint8 of the shape the cell trains on (the speed does not depend on their content). An epoch is 50,000
images (CIFAR's training split) = 50000 // batch steps.

Variants (``--variants``, each timed on its own; a failing one prints its error and the others go on),
the trainer's speed switches (docs/gpu-defects.md). Each changes one switch of ``eager``:

- ``eager``: the trainer's default step, its switches read from ``VisionTrainSettings``' defaults and
  applied as ``train()`` applies them (:func:`switches`): today two augmentation calls, channels-last on
  CUDA only, ``cudnn.benchmark`` on (CUDA only: on a CPU ``train()`` leaves the flag alone), no compile;
- ``one_call``: both views in one augmentation call of 2B images (``augment_calls: one``);
- ``channels_last`` / ``contiguous``: the memory format forced either way (G6: IEEE-fp32 convolutions);
- ``cudnn_bench`` / ``cudnn_off``: ``cudnn.benchmark`` forced on / off (``cudnn_benchmark: true`` /
  ``false``; with ``all`` timed on CUDA only: on a CPU the flag changes nothing);
- ``compile``: ``torch.compile`` of the encoder and of the augmentation's pure half (``compile: true``;
  the first steps, compilation included, are reported as ``warmup_s``).

Each row reports the switches the timed steps ran with: ``cudnn_benchmark`` is the flag's value read
during the timed steps (and restored afterwards), not after.

It builds no ``VisionTrainSettings`` (whose schema check needs jsonschema, absent on some GPU machines:
G4): the settings are the dataclass's defaults and the shape's values, read without validation.

The shapes (``--shape``) are the config's cell kinds:

- ``macl``: MACL App. B.3, CIFAR ResNet-18 (3x3 stem, width 64) at 32 px, MLP head 512 -> 128, NT-Xent,
  Adam; precision ``auto`` (bf16 on CUDA) as the cells;
- ``oar-resnet18`` / ``oar-resnet50``: OAR §5, torchvision's ResNet-18 / ResNet-50 (ResNet-50 with its
  512-d output layer) at 224 px, no head, InfoNCE plus the OAR term on a second, labelled batch of
  views, SGD with momentum; precision fp32 unless ``--precision``.

    python benchmarks/vision_throughput.py                                  # MACL's shape, CUDA if any
    python benchmarks/vision_throughput.py --shape oar-resnet50 --batch-size 256 --precision tf32
    python benchmarks/vision_throughput.py --device cpu --steps 2 --warmup 1

From another script (``benchmarks/`` on ``sys.path``), one row each (:func:`measure`; ``steps=30,
warmup=10`` by default)::

    from vision_throughput import measure
    cuda = torch.device("cuda")
    measure(cuda, "macl", 256, precision="bf16")                   # MACL, the trainer's default step
    measure(cuda, "oar-resnet18", 128, precision="fp32", variant="cudnn_bench")  # OAR, cudnn.benchmark on
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
import traceback
from types import SimpleNamespace

import torch

from contrastlab.data.images import IMAGE_STATS
from contrastlab.losses import build_loss
from contrastlab.losses.oar import orthonormal_anchors
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.precision import CHOICES as PRECISIONS
from contrastlab.training.runtime import TrainingRun, build_optimizer, device_name
from contrastlab.training.vision import OarBatch, VisionTrainSettings, effective_lr, train_step, two_views

VARIANTS = ("eager", "one_call", "channels_last", "contiguous", "cudnn_bench", "cudnn_off", "compile")
#: The variants that change only ``cudnn.benchmark``: nothing to switch on a CPU (skipped there by ``all``).
CUDNN_VARIANTS = ("cudnn_bench", "cudnn_off")
#: Each variant's one change to the trainer's default switches (``eager``: none).
CHANGES = {
    "eager": {},
    "one_call": {"augment_calls": "one"},
    "channels_last": {"channels_last": True},
    "contiguous": {"channels_last": False},
    "cudnn_bench": {"cudnn_benchmark": True},
    "cudnn_off": {"cudnn_benchmark": False},
    "compile": {"compile": True},
}

CIFAR_TRAIN_IMAGES = 50_000
#: The config's cell kinds: VisionTrainSettings fields, the input side and whether the OAR pass runs.
SHAPES = {
    "macl": dict(settings={"loss": "ntxent", "loss_hp": {"tau": 0.1}}, size=32, oar=False, precision="auto"),
    "oar-resnet18": dict(
        settings={
            "loss": "ntxent",
            "loss_hp": {"tau": 1.0},
            "stem": "imagenet",
            "optimizer": "sgd",
            "lr": 0.01,
            "lr_reference_batch": None,
            "weight_decay": 5e-4,
            "projection_head": False,
        },
        size=224,
        oar=True,
        precision="fp32",
    ),
}
SHAPES["oar-resnet50"] = {
    **SHAPES["oar-resnet18"],
    "settings": {**SHAPES["oar-resnet18"]["settings"], "arch": "resnet50", "out_dim": 512},
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _settings(**values) -> SimpleNamespace:
    """VisionTrainSettings' defaults with ``values``, unvalidated (no jsonschema needed)."""
    defaults = {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(VisionTrainSettings)
    }
    s = SimpleNamespace(**(defaults | values))
    s.augment = lambda size, mean, std: VisionTrainSettings.augment(s, size, mean, std)
    return s


def switches(variant: str, device: torch.device) -> dict:
    """The speed switches ``variant`` runs with on ``device``: the trainer's defaults
    (``VisionTrainSettings``' field defaults, as ``train()`` applies them) with the variant's one change
    (:data:`CHANGES`).

    ``channels_last``: the setting, or (``None``) CUDA only, as ``train()``; ``cudnn_benchmark``: the
    value to set, or ``None`` to leave the flag as it is (``train()`` sets it on CUDA only)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    d = _settings()
    trainer = {
        "channels_last": device.type == "cuda" if d.channels_last is None else d.channels_last,
        "augment_calls": d.augment_calls,
        "cudnn_benchmark": d.cudnn_benchmark if device.type == "cuda" else None,
        "compile": d.compile,
    }
    return trainer | CHANGES[variant]


def measure(
    device: torch.device,
    shape: str,
    batch_size: int,
    steps: int = 30,
    warmup: int = 10,
    precision: str | None = None,
    width: int | None = None,
    size: int | None = None,
    variant: str = "eager",
) -> dict:
    """One row: the step's time and throughput for ``shape`` (:data:`SHAPES`) at ``batch_size`` in
    ``variant`` (:data:`VARIANTS`; ``eager`` = the trainer's default switches), ``steps`` timed after
    ``warmup`` untimed; ``precision`` None: the shape's (``auto`` = bf16 on CUDA; fp32 for OAR);
    ``width``/``size`` shrink the encoder and images for a smoke test. ``cudnn.benchmark`` is restored
    afterwards; the row's ``cudnn_benchmark`` is the value in effect during the timed steps."""
    switch = switches(variant, device)
    spec = SHAPES[shape]
    torch.manual_seed(0)
    s = _settings(
        batch_size=batch_size,
        precision=precision or spec["precision"],
        **spec["settings"],
        **({"width": width} if width else {}),
    )
    size = size or spec["size"]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    benchmark_was = torch.backends.cudnn.benchmark
    try:
        if switch["cudnn_benchmark"] is not None:
            torch.backends.cudnn.benchmark = switch["cudnn_benchmark"]
        return _measure(device, shape, s, size, steps, warmup, variant, switch)
    finally:
        torch.backends.cudnn.benchmark = benchmark_was


def _pieces(device, shape, s, size, switch) -> SimpleNamespace:
    """The step's parts as ``train()`` builds them: run, encoder, head, params, optimiser, loss,
    augmentation, random uint8 images and labels, anchors, the views generator, the memory format."""
    spec, batch_size = SHAPES[shape], s.batch_size
    run = TrainingRun(
        tempfile.mkdtemp(), device=device, precision=s.precision, state_every=None, progress=False
    )
    channels_last = switch["channels_last"]
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    encoder = build_encoder(s.arch, stem=s.stem, width=s.width, out_dim=s.out_dim)
    encoder.to(device, memory_format=memory_format).train()
    head = (
        ProjectionHead(encoder.feature_dim, s.head_hidden, s.head_dim)
        if s.projection_head
        else torch.nn.Identity()
    )
    head.to(device).train()
    params = [*encoder.parameters(), *head.parameters()]
    hp = {"momentum": s.momentum} if s.optimizer == "sgd" else {}
    optimizer = build_optimizer(
        s.optimizer, params, device, lr=effective_lr(s), weight_decay=s.weight_decay, **hp
    )
    loss_dim = s.head_dim if s.projection_head else encoder.feature_dim
    return SimpleNamespace(
        run=run, encoder=encoder, head=head, params=params, optimizer=optimizer,
        loss_fn=build_loss(s.loss, **s.loss_hp), augment=s.augment(size, *IMAGE_STATS["cifar10"]),
        images=torch.randint(0, 256, (batch_size, 3, size, size), dtype=torch.uint8, device=device),
        labels=torch.randint(0, 10, (batch_size,), device=device),
        anchors=orthonormal_anchors(10, loss_dim, generator=torch.Generator().manual_seed(0)).to(device),
        views=torch.Generator(device=device).manual_seed(0), memory_format=memory_format,
        oar=spec["oar"],
    )  # fmt: skip


def _measure(device, shape, s, size, steps, warmup, variant, switch) -> dict:
    spec, batch_size = SHAPES[shape], s.batch_size
    p = _pieces(device, shape, s, size, switch)
    run, encoder, head, params, optimizer = p.run, p.encoder, p.head, p.params, p.optimizer
    loss_fn = p.loss_fn
    augment, images, labels, anchors, views = p.augment, p.images, p.labels, p.anchors, p.views
    channels_last, memory_format, calls = switch["channels_last"], p.memory_format, switch["augment_calls"]
    forward_encoder = encoder
    if switch["compile"]:  # as train(): the encoder and the augmentation's pure half
        forward_encoder = torch.compile(encoder)
        augment.apply = torch.compile(augment.apply)

    def step():
        oar = (
            OarBatch(*two_views(augment, images, views, calls), labels, anchors, 1.0, labels_checked=True)
            if spec["oar"]
            else None
        )
        with run.step_context():
            train_step(
                forward_encoder,
                head,
                loss_fn,
                *two_views(augment, images, views, calls),
                autocast=run.autocast,
                memory_format=memory_format,
                with_stats=False,
                oar=oar,
                scale=run.scale,
                head_autocast=s.head_autocast,
            )
            run.optimizer_step(optimizer, params, clip_norm=None)

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    warmup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    benchmark_in_effect = torch.backends.cudnn.benchmark  # read while the timed steps run
    _sync(device)
    step_s = (time.perf_counter() - t0) / steps
    # The augmentation alone (two views, four with the OAR pass), for the share of the step it costs.
    t0 = time.perf_counter()
    for _ in range(steps):
        for _ in range(2 if spec["oar"] else 1):
            two_views(augment, images, views, calls)
    _sync(device)
    augment_s = (time.perf_counter() - t0) / steps
    steps_per_epoch = CIFAR_TRAIN_IMAGES // batch_size
    return {
        "variant": variant,
        "shape": shape,
        "arch": s.arch,
        "params": sum(p.numel() for p in params),
        "input_size": size,
        "oar_pass": spec["oar"],
        "device": device_name(device),
        **run.precision.record(),
        "cudnn_benchmark": benchmark_in_effect,
        "batch_size": batch_size,
        "steps_timed": steps,
        "channels_last": channels_last,
        "augment_calls": calls,
        "compiled": switch["compile"],
        "warmup_s": round(warmup_s, 2),
        "step_s": round(step_s, 4),
        "steps_per_s": round(1 / step_s, 3),
        "augment_share": round(augment_s / step_s, 3),
        "images_per_s": round(batch_size / step_s, 1),
        "epoch_s": round(step_s * steps_per_epoch, 2),
        "epoch_note": f"{steps_per_epoch} steps x measured step time"
        + (" (extrapolated from a few CPU steps)" if device.type == "cpu" else ""),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        if device.type == "cuda"
        else None,
    }


def measure_captured(
    device: torch.device,
    batch_size: int,
    steps: int = 100,
    warmup: int = 10,
    precision: str | None = None,
    width: int | None = None,
    size: int | None = None,
) -> dict:
    """MACL's step (shape ``macl``, the trainer's default switches) as the trainer captures it on CUDA
    (``training.vision_capture.capture_vision_step``: draws, views, forward, backward, fused Adam in one
    graph): capture (warm-up included, ``capture_s``), ``warmup`` untimed and ``steps`` timed replays of
    one batch of random images. CUDA only."""
    from contrastlab.training import vision_capture

    switch = switches("eager", device)
    s = _settings(batch_size=batch_size, precision=precision or "auto", **SHAPES["macl"]["settings"],
                  **({"width": width} if width else {}))  # fmt: skip
    benchmark_was = torch.backends.cudnn.benchmark
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats(device)
    try:
        torch.backends.cudnn.benchmark = switch["cudnn_benchmark"]
        p = _pieces(device, "macl", s, size or SHAPES["macl"]["size"], switch)
        parts = (p.encoder, p.head, p.loss_fn, p.optimizer, p.params)
        t0 = time.perf_counter()
        step = vision_capture.capture_vision_step(
            p.run, train_step, parts, p.augment, p.views, p.images, calls=switch["augment_calls"],
            memory_format=p.memory_format, head_autocast=s.head_autocast,
        )  # fmt: skip
        capture_s = time.perf_counter() - t0
        losses = [step(p.images)[0].loss.clone() for _ in range(warmup)]
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(p.images)
        _sync(device)
        step_s = (time.perf_counter() - t0) / steps
        finite = bool(torch.isfinite(torch.stack(losses)).all()) if losses else None
    finally:
        torch.backends.cudnn.benchmark = benchmark_was
    return {
        "variant": "captured", "shape": "macl", "device": device_name(device), **p.run.precision.record(),
        "cudnn_benchmark": switch["cudnn_benchmark"], "batch_size": batch_size, "steps_timed": steps,
        "channels_last": switch["channels_last"], "augment_calls": switch["augment_calls"],
        "capture_s": round(capture_s, 2), "step_s": round(step_s, 5), "steps_per_s": round(1 / step_s, 3),
        "ms_per_step": round(1000 * step_s, 3), "images_per_s": round(batch_size / step_s, 1),
        "losses_finite": finite, "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda (default: cuda if available)")
    parser.add_argument("--shape", default="macl", choices=sorted(SHAPES))
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 30 on CUDA, 2 on CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 10 / 1)")
    parser.add_argument("--precision", default=None, choices=PRECISIONS, help="default: the cells' precision")
    parser.add_argument("--width", type=int, default=None, help="encoder width (smoke tests)")
    parser.add_argument("--size", type=int, default=None, help="image side (smoke tests)")
    parser.add_argument(
        "--variants", default="eager", help=f"comma-separated, of {', '.join(VARIANTS)}, or all"
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    steps = args.steps or (30 if device.type == "cuda" else 2)
    warmup = args.warmup if args.warmup is not None else (10 if device.type == "cuda" else 1)
    variants = VARIANTS if args.variants == "all" else tuple(args.variants.split(","))
    rows = []
    for variant in variants:
        if args.variants == "all" and variant in CUDNN_VARIANTS and device.type != "cuda":
            continue  # nothing to switch on a CPU
        try:
            row = measure(
                device,
                args.shape,
                args.batch_size,
                steps,
                warmup,
                args.precision,
                args.width,
                args.size,
                variant,
            )
        except Exception as error:  # one variant's failure (e.g. compile without a compiler) is reported
            traceback.print_exc()
            row = {"variant": variant, "error": f"{type(error).__name__}: {error}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    # The table on stderr: stdout stays one JSON line per variant.
    table = [
        f"\n{'variant':<14} {'images/s':>10} {'steps/s':>9} {'step ms':>9} {'augment':>8} {'warm-up s':>10}"
    ]
    for row in rows:
        if "error" in row:
            table.append(f"{row['variant']:<14} {row['error']}")
            continue
        table.append(
            f"{row['variant']:<14} {row['images_per_s']:>10.1f} {row['steps_per_s']:>9.2f} "
            f"{1000 * row['step_s']:>9.1f} {row['augment_share']:>8.0%} {row['warmup_s']:>10.1f}"
        )
    print("\n".join(table), file=sys.stderr)


if __name__ == "__main__":
    main()
