"""Contrastive pre-training of an image encoder (protocol.md §3; MACL App. B.3).

One short loop: each step takes a batch of images from a per-epoch permutation of the training split
(kept on the device as uint8), draws two SimCLR views of each on the device
(:class:`~contrastlab.training.augment.SimCLRAugment`), encodes both views in one forward pass of 2B
images (so BatchNorm sees the whole 2N batch, as SimCLR), projects them with the MLP head and applies
the loss to the two [B, head_dim] halves. Adam with MACL's learning-rate rule (lr x batch/256 above
256), a constant rate, weight decay 1e-6. bf16 autocast and channels-last on CUDA. Only full batches
by default (``drop_last``): every step has the same number of negatives.

The OAR study (OAR §4-5) adds, per step, a batch of *labelled* images from a fixed subset of the
training split (``oar_fraction``, :func:`~contrastlab.data.images.labelled_subset`), seen in two views
in a second forward pass (its own BatchNorm batch, as the authors' code), and the Orthonormal Anchor
Regression term (:func:`~contrastlab.losses.oar.oar_loss`) of their embeddings against fixed anchors
drawn from the seed (saved beside the encoder, ``anchors.safetensors``); SGD with momentum and a
cosine-annealed rate, and no projection head (the paper trains on the encoder's 512-d output), are
settings.

Snapshots (model, head, optimiser, the augmentation generator and every RNG, the log offset) every
``state_every`` steps make a killed job resume to a bit-identical encoder and log on CPU (the helpers
of :mod:`contrastlab.training.state`). The final encoder's state dict is written to
``out_dir/encoder.safetensors`` (``encoder.pt`` by ``torch.save`` where safetensors is not installed)
with ``settings.json`` (resolved settings, run information, package versions, git SHA); there is no
checkpoint selection (the papers evaluate the encoder after the last epoch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.data.images import IMAGE_STATS, NUM_CLASSES, labelled_subset, load_images
from contrastlab.losses import build_loss
from contrastlab.losses.oar import oar_loss, orthonormal_anchors
from contrastlab.models import pick_device
from contrastlab.models.vision import ProjectionHead, build_encoder
from contrastlab.provenance import run_metadata
from contrastlab.training import state as st
from contrastlab.training.augment import SimCLRAugment
from contrastlab.training.sentence import (
    JsonlLog,
    NonFiniteLossError,
    autocast_for,
    device_name,
    epoch_order,
    resolve_precision,
)

__all__ = [
    "ENCODER_FILE",
    "ENCODER_FILES",
    "SETTINGS_FILE",
    "ANCHORS_FILE",
    "OarBatch",
    "VisionTrainSettings",
    "effective_lr",
    "scheduled_lr",
    "load_encoder",
    "load_weights",
    "train_vision",
]

try:
    import safetensors.torch as _safetensors
except ImportError:  # pragma: no cover - safetensors comes with transformers
    _safetensors = None

#: The encoder's weights in ``out_dir`` (:func:`load_encoder` reads either name).
ENCODER_FILE = "encoder.safetensors" if _safetensors is not None else "encoder.pt"
ENCODER_FILES = ("encoder.safetensors", "encoder.pt")
SETTINGS_FILE = "settings.json"
#: The OAR anchors [K, D] of an OAR run, beside the encoder (safetensors key ``anchors``).
ANCHORS_FILE = "anchors.safetensors"
OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class VisionTrainSettings:
    """Everything that defines one vision cell; defaults are MACL App. B.3's CIFAR-10 setting."""

    dataset: str = "cifar10"  # digits | cifar10 | cifar100
    loss: str = "ntxent"
    loss_hp: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 42
    arch: str = "resnet18"  # vision_models.ARCHS
    stem: str = "cifar"  # 3x3 stride-1 stem, no max-pool (App. B.3)
    width: int = 64  # channels of the first stage (64 = the standard ResNet)
    image_size: int | None = None  # None: the dataset's own (CIFAR 32 as App. B.3, digits 16)
    out_dim: int | None = (
        None  # a final linear layer of the encoder to this size (OAR §5.2: ResNet-50 -> 512)
    )
    input_size: int | None = (
        None  # side of the network's input; None: the images' own (OAR §5 resizes to 224)
    )
    projection_head: bool = True  # False: the loss sees the encoder's output (OAR §5.1, "used for training")
    head_hidden: int = 512
    head_dim: int = 128  # protocol.md §3: 2-layer MLP head to 128-d
    epochs: int = 200  # App. B.3
    max_steps: int | None = None  # stop early (tests, presets)
    batch_size: int = 256  # App. B.3 / Table B.3 sweep 64-1024
    drop_last: bool = True  # only full batches (the last partial batch of an epoch is skipped)
    optimizer: str = "adam"  # App. B.3: Adam replaces SimCLR's LARS; sgd: OAR §5 (momentum below)
    momentum: float = 0.9  # SGD only (the OAR authors' OAR_model_SimCLR.py)
    lr: float = 1e-3  # App. B.3 base rate ...
    lr_reference_batch: int | None = 256  # ... x batch/256 for batches above 256; None: no scaling
    lr_schedule: str = "constant"  # constant (App. B.3) | cosine: annealed to 0 over `epochs`, per epoch
    weight_decay: float = 1e-6  # App. B.3
    # OAR (§4): the anchor-regression term on a fixed labelled subset; 0 switches it off.
    oar_fraction: float = 0.0  # fraction of the training split whose labels the term uses (OAR: 0.1)
    oar_weight: float = 1.0  # weight of the term (the authors add it with weight 1)
    oar_batch_size: int | None = None  # labelled images per step; None: batch_size (the authors' loader)
    precision: str = "auto"  # auto: bf16 on CUDA, fp32 on CPU
    channels_last: bool | None = None  # None: on CUDA only (faster convolutions with bf16)
    # SimCLR's CIFAR augmentations (Chen et al. 2020, App. A; the four types of App. B.3); OAR uses
    # crop_scale (0.8, 1.0) and jitter (0.2, 0.2, 0.2, 0.1) (protocol.md section 3).
    crop_scale: tuple[float, float] = (0.08, 1.0)  # area fraction of the random resized crop
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)  # its aspect-ratio range
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1)  # brightness, contrast, sat., hue
    jitter_p: float = 0.8
    gray_p: float = 0.2
    flip_p: float = 0.5
    log_every: int = 50  # steps between log lines (and progress lines on stderr)
    state_every: int = 500  # steps between resumable snapshots

    def __post_init__(self) -> None:
        for name in ("crop_scale", "crop_ratio", "jitter"):  # YAML and JSON give lists
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        if len(self.crop_scale) != 2 or not 0 < self.crop_scale[0] <= self.crop_scale[1] <= 1:
            raise ValueError(
                f"crop_scale must be (low, high) with 0 < low <= high <= 1, got {self.crop_scale}"
            )
        if len(self.crop_ratio) != 2 or not 0 < self.crop_ratio[0] <= self.crop_ratio[1]:
            raise ValueError(f"crop_ratio must be (low, high) with 0 < low <= high, got {self.crop_ratio}")
        if len(self.jitter) != 4 or min(self.jitter) < 0 or self.jitter[3] > 0.5:
            raise ValueError(
                "jitter must be (brightness, contrast, saturation, hue) >= 0 with hue <= 0.5, "
                f"got {self.jitter}"
            )
        for name in ("jitter_p", "gray_p", "flip_p"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(
                f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}"
            )
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if not 0 <= self.oar_fraction <= 1 or self.oar_weight < 0:
            raise ValueError(
                "oar_fraction must be in [0, 1] and oar_weight >= 0, "
                f"got {self.oar_fraction}, {self.oar_weight}"
            )
        for name in ("out_dim", "input_size", "oar_batch_size"):
            value = getattr(self, name)
            if value is not None and value < (2 if name == "oar_batch_size" else 1):
                raise ValueError(
                    f"{name} must be None or >= {2 if name == 'oar_batch_size' else 1}, got {value}"
                )
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16, got {self.precision!r}")
        for name in ("batch_size", "epochs", "log_every", "state_every", "width", "head_hidden", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"lr must be > 0 and weight_decay >= 0, got {self.lr}, {self.weight_decay}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (the loss needs negatives), got {self.batch_size}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> VisionTrainSettings:
        """Build from a flat mapping (the workflow's resolved settings); unknown keys raise."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown vision training setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
            )
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (tuples as lists): ``from_dict(to_dict())`` gives the same settings."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def augment(self, size: int, mean, std) -> SimCLRAugment:
        """The training augmentation these settings describe, for images of side ``size``."""
        return SimCLRAugment(
            size,
            mean=mean,
            std=std,
            crop_scale=self.crop_scale,
            crop_ratio=self.crop_ratio,
            jitter=self.jitter,
            jitter_p=self.jitter_p,
            gray_p=self.gray_p,
            flip_p=self.flip_p,
        )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, tuple) else value


def effective_lr(settings: VisionTrainSettings) -> float:
    """MACL App. B.3: lr for batches up to the reference, lr x batch / reference above it.

    >>> effective_lr(VisionTrainSettings(batch_size=1024)), effective_lr(VisionTrainSettings(batch_size=64))
    (0.004, 0.001)
    """
    ref = settings.lr_reference_batch
    if ref is None or settings.batch_size <= ref:
        return settings.lr
    return settings.lr * settings.batch_size / ref


def _write_encoder(
    out_dir: Path,
    encoder: torch.nn.Module,
    summary: dict[str, Any],
    state_dir: Path,
    log_path: Path,
    anchors: torch.Tensor | None = None,
) -> None:
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights = {k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()}
    if _safetensors is not None:
        _safetensors.save_file(weights, str(tmp / ENCODER_FILE))
    else:  # pragma: no cover
        torch.save(weights, tmp / ENCODER_FILE)
    if anchors is not None:
        anchors = anchors.detach().cpu().contiguous()
        if _safetensors is not None:
            _safetensors.save_file({"anchors": anchors}, str(tmp / ANCHORS_FILE))
        else:  # pragma: no cover
            torch.save({"anchors": anchors}, tmp / ANCHORS_FILE)
    (tmp / SETTINGS_FILE).write_text(json.dumps(summary, indent=1, default=float) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_log = log_path.with_name(log_path.name + ".partial")
    shutil.copyfile(state_dir / st.LOG_FILE, tmp_log)
    tmp_log.replace(log_path)


@dataclass(frozen=True)
class OarBatch:
    """A labelled batch of the OAR term: two views [B, 3, S, S], labels [B], anchors [K, D], weight."""

    view1: torch.Tensor
    view2: torch.Tensor
    labels: torch.Tensor
    anchors: torch.Tensor
    weight: float


def train_step(
    encoder,
    head,
    loss_fn,
    optimizer,
    view1,
    view2,
    *,
    autocast,
    memory_format,
    with_stats: bool,
    oar: OarBatch | None = None,
):
    """One optimiser step on two augmented views [B, 3, S, S]: both views through the encoder and head
    in one forward pass of 2B images (BatchNorm sees the whole 2N batch), the loss on the halves; with
    ``oar``, its labelled views in a second pass and ``weight`` x the OAR term added (OAR §4).
    Returns (loss output, h1, h2, OAR term or None); the benchmark times exactly this."""
    x = torch.cat([view1, view2]).contiguous(memory_format=memory_format)
    with autocast():
        h1, h2 = head(encoder(x)).chunk(2)
    out = loss_fn(h1, h2, with_stats=with_stats)
    total, oar_value = out.loss, None
    if oar is not None:
        x = torch.cat([oar.view1, oar.view2]).contiguous(memory_format=memory_format)
        with autocast():
            z1, z2 = head(encoder(x)).chunk(2)
        oar_value = oar_loss(z1, z2, oar.labels, oar.anchors)
        total = total + oar.weight * oar_value
    total.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out, h1, h2, oar_value


def scheduled_lr(settings: VisionTrainSettings, epoch: int) -> float:
    """The rate of ``epoch`` (0-based): :func:`effective_lr`, constant or cosine-annealed to 0 over
    ``settings.epochs`` epochs (``CosineAnnealingLR(T_max=epochs)`` stepped per epoch, the OAR authors'
    schedule).

    >>> s = VisionTrainSettings(lr=1.0, lr_schedule="cosine", epochs=4, lr_reference_batch=None)
    >>> [round(scheduled_lr(s, e), 4) for e in range(4)]
    [1.0, 0.8536, 0.5, 0.1464]
    """
    lr = effective_lr(settings)
    if settings.lr_schedule == "constant":
        return lr
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(epoch, settings.epochs) / settings.epochs))


def _labelled_order(n: int, seed: int, cycle: int) -> np.ndarray:
    """The order of the labelled subset in one pass over it (independent of the main epoch order)."""
    return np.random.default_rng([seed, 0x0A4, cycle]).permutation(n)


def train_vision(
    settings: VisionTrainSettings,
    *,
    data_root: str | Path | None,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    device: str | None = None,
    download: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Train one vision cell; write the encoder to ``out_dir`` and the JSONL log to ``log_path``.

    ``data_root`` holds the CIFAR folders (unused for digits); ``download`` fetches CIFAR there first
    when it is absent (:func:`~contrastlab.data.images.load_images`; the workflow does this in its own
    data rule). ``state_dir`` holds snapshots while training (a rerun resumes from them; deleted on
    success). ``progress``: a progress bar and one JSON line per log step on stderr. Returns the
    summary also written to ``out_dir/settings.json``.
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    out_dir, log_path, state_dir = map(Path, (out_dir, log_path, state_dir))
    s = settings
    dev = pick_device(device)
    precision = resolve_precision(s.precision, dev)
    autocast = autocast_for(precision, dev)
    use_channels_last = dev.type == "cuda" if s.channels_last is None else s.channels_last
    channels_last = torch.channels_last if use_channels_last else torch.contiguous_format

    data = load_images(s.dataset, "train", root=data_root, download=download, image_size=s.image_size)
    n_images, size = len(data.labels), data.images.shape[-1]
    if s.drop_last:  # every step sees a full batch of negatives
        steps_per_epoch = n_images // s.batch_size
    else:
        steps_per_epoch = -(-n_images // s.batch_size)
        if n_images % s.batch_size == 1:
            raise ValueError(
                f"drop_last=False with {n_images} images and batch {s.batch_size} leaves a last batch of "
                "one image (no negatives); change batch_size or set drop_last"
            )
    if steps_per_epoch == 0:
        raise ValueError(
            f"{s.dataset} has {n_images} training images, fewer than one batch of {s.batch_size}"
        )
    total_steps = s.max_steps if s.max_steps is not None else steps_per_epoch * s.epochs
    images = data.images.to(dev)
    mean, std = IMAGE_STATS[s.dataset]
    input_size = s.input_size or size
    augment = s.augment(input_size, mean, std)

    random.seed(s.seed)
    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    encoder = build_encoder(s.arch, stem=s.stem, width=s.width, out_dim=s.out_dim)
    if s.projection_head:
        head: torch.nn.Module = ProjectionHead(encoder.feature_dim, s.head_hidden, s.head_dim)
    else:
        head = torch.nn.Identity()
    loss_dim = s.head_dim if s.projection_head else encoder.feature_dim
    encoder.to(dev, memory_format=channels_last).train()
    head.to(dev).train()
    params = [*encoder.parameters(), *head.parameters()]
    lr = scheduled_lr(s, 0)
    fused = dev.type == "cuda" or None
    if s.optimizer == "adam":
        optimizer = torch.optim.Adam(params, lr=lr, weight_decay=s.weight_decay, fused=fused)
    else:
        optimizer = torch.optim.SGD(
            params, lr=lr, momentum=s.momentum, weight_decay=s.weight_decay, fused=fused
        )
    loss_fn = build_loss(s.loss, **s.loss_hp)
    oar = None
    if s.oar_fraction > 0:
        labelled = labelled_subset(n_images, s.oar_fraction, s.seed).to(dev)
        oar_batch_size = min(s.oar_batch_size or s.batch_size, len(labelled))
        # Drawn from the run's seed on the CPU in float64: the same anchors on every device.
        anchors = orthonormal_anchors(
            NUM_CLASSES[s.dataset], loss_dim, generator=torch.Generator().manual_seed(s.seed)
        )
        oar = {
            "labelled": labelled,
            "labels": data.labels.to(dev),
            "batch_size": oar_batch_size,
            "steps_per_cycle": len(labelled) // oar_batch_size,
            "anchors": anchors.to(dev),
        }
    views = torch.Generator(device=dev).manual_seed(s.seed)  # the augmentations' draws

    fingerprint = hashlib.sha256(
        json.dumps([s.to_dict(), n_images, size], sort_keys=True).encode()
    ).hexdigest()[:16]
    saved = st.load_state(state_dir, fingerprint)
    log = JsonlLog(state_dir / st.LOG_FILE)
    timings = {"train_s": 0.0, "state_s": 0.0, "timed_images": 0}
    run_info = {
        "device": str(dev),
        "device_name": device_name(dev),
        "precision": precision,
        "requested_precision": s.precision,
        "channels_last": use_channels_last,
        "n_images": n_images,
        "image_size": size,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "effective_lr": effective_lr(s),
        "input_size": input_size,
        "feature_dim": encoder.feature_dim,
        "loss_dim": loss_dim,
        "oar_labelled": len(oar["labelled"]) if oar else 0,
        "trainable_params": sum(p.numel() for p in params),
    }
    if saved is None:
        st.reset_state_dir(state_dir)
        step, resumed_from, interval = 0, [], (0.0, 0, 0)
        log.write({"event": "start", "settings": s.to_dict(), **run_info, "meta": run_metadata()})
    else:
        encoder.load_state_dict(saved["encoder"])
        head.load_state_dict(saved["head"])
        optimizer.load_state_dict(saved["optimizer"])
        views.set_state(saved["views"].to(views.get_state().device))
        step, resumed_from = saved["step"], [*saved["resumed_from"], saved["step"]]
        timings.update(saved["timings"])
        st.truncate_log(state_dir, saved["log_offset"])
        log.write({"event": "resume", "step": step})
        st.restore_rng(saved["rng"])
        interval = saved["interval"]
    del saved

    bar = tqdm(
        total=total_steps,
        initial=step,
        unit="step",
        desc=f"{s.loss} {s.arch} bs{s.batch_size}",
        disable=not progress,
        mininterval=1.0 if sys.stderr.isatty() else 30.0,
        dynamic_ncols=True,
    )
    loss_sum = torch.full((), interval[0], device=dev)
    first_bad = torch.full((), -1, dtype=torch.long, device=dev)
    interval_steps, interval_t, paused = interval[1], time.perf_counter(), 0.0
    interval_images = interval[2]
    order_epoch, order = -1, torch.empty(0, dtype=torch.long)
    oar_cycle, oar_order = -1, torch.empty(0, dtype=torch.long)
    while step < total_steps:
        step += 1
        epoch, position = divmod(step - 1, steps_per_epoch)
        if epoch != order_epoch:
            order_epoch = epoch
            order = torch.from_numpy(epoch_order(n_images, s.seed, epoch)).to(dev)
            lr = scheduled_lr(s, epoch)
            for group in optimizer.param_groups:
                group["lr"] = lr
        batch = images[order[position * s.batch_size : (position + 1) * s.batch_size]]
        logging = step % s.log_every == 0 or step == total_steps
        snapshot = step % s.state_every == 0 and step < total_steps
        oar_batch = None
        if oar is not None:
            # The labelled loader cycles independently of the epoch (the authors' max_size_cycle).
            cycle, oar_position = divmod(step - 1, oar["steps_per_cycle"])
            if cycle != oar_cycle:
                oar_cycle = cycle
                oar_order = oar["labelled"][
                    torch.from_numpy(_labelled_order(len(oar["labelled"]), s.seed, cycle)).to(dev)
                ]
            b = oar["batch_size"]
            rows = oar_order[oar_position * b : (oar_position + 1) * b]
            oar_batch = OarBatch(
                augment(images[rows], views),
                augment(images[rows], views),
                oar["labels"][rows],
                oar["anchors"],
                s.oar_weight,
            )
        out, h1, h2, oar_value = train_step(
            encoder,
            head,
            loss_fn,
            optimizer,
            augment(batch, views),
            augment(batch, views),
            autocast=autocast,
            memory_format=channels_last,
            with_stats=logging,
            oar=oar_batch,
        )
        loss = out.loss.detach() if oar_value is None else (out.loss + s.oar_weight * oar_value).detach()
        loss_sum += loss
        interval_images += len(batch)
        first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
        interval_steps += 1
        bar.update(1)
        if logging or snapshot or dev.type == "cpu":  # CPU: checking costs nothing
            bad = int(first_bad.item())
            if bad >= 0:
                stats = json.dumps(loss_fn(h1.detach(), h2.detach(), with_stats=True).stats, default=float)
                raise NonFiniteLossError(
                    f"loss {s.loss!r} (hp {json.dumps(dict(s.loss_hp))}) is not finite at step {bad} "
                    f"(detected at step {step}, value now {loss.item()}); loss stats: {stats}. "
                    "Try a lower lr, precision=fp32, or check the hyperparameters."
                )
        if logging:
            now = time.perf_counter()
            elapsed = now - interval_t - paused
            timings["train_s"] += elapsed
            record = {
                "event": "train",
                "step": step,
                "epoch": epoch,
                "loss": (loss_sum / interval_steps).item(),
                "loss_last": loss.item(),
                "lr": lr,
                "stats": dict(out.stats) | ({"oar": oar_value.item()} if oar_value is not None else {}),
                "steps_per_s": interval_steps / elapsed,
                "images_per_s": interval_images / elapsed,
            }
            log.write(record)
            timings["timed_images"] += interval_images
            if progress:
                brief = {k: record[k] for k in ("step", "epoch", "loss")} | {
                    "images_per_s": round(record["images_per_s"], 1)
                }
                bar.write(json.dumps(brief), file=sys.stderr)
            bar.set_postfix(loss=f"{record['loss']:.4f}", refresh=False)
            loss_sum.zero_()
            interval_steps, interval_images, interval_t, paused = 0, 0, now, 0.0
        if snapshot:
            t = time.perf_counter()
            payload = {
                "fingerprint": fingerprint,
                "step": step,
                "resumed_from": resumed_from,
                "timings": timings,
                "log_offset": log.offset(),
                "encoder": encoder.state_dict(),
                "head": head.state_dict(),
                "optimizer": optimizer.state_dict(),
                "views": views.get_state(),
                "rng": st.capture_rng(),
                # The log's running interval, so that a resumed run logs the same interval means.
                "interval": (loss_sum.item(), interval_steps, interval_images),
            }
            st.save_state(state_dir, payload, {"step": step, "fingerprint": fingerprint})
            timings["state_s"] += time.perf_counter() - t
            paused += time.perf_counter() - t
    bar.close()

    timings["total_s"] = time.perf_counter() - started
    timings["images_per_s"] = timings["timed_images"] / timings["train_s"] if timings["train_s"] else None
    summary = {
        "steps": step,
        "epochs": step / steps_per_epoch,
        "timings": timings,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None,
        "resumed_from": resumed_from,
        **run_info,
        "settings": s.to_dict(),
        "meta": run_metadata(),
    }
    log.write(
        {
            "event": "end",
            **{k: summary[k] for k in ("steps", "timings", "device_name", "peak_gpu_memory_gib")},
        }
    )
    _write_encoder(out_dir, encoder, summary, state_dir, log_path, oar["anchors"] if oar else None)
    shutil.rmtree(state_dir, ignore_errors=True)
    return summary


def load_encoder(
    out_dir: str | Path, device: str | torch.device = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The trained encoder of ``out_dir`` (eval mode) and its ``settings.json`` summary."""
    out_dir = Path(out_dir)
    summary = json.loads((out_dir / SETTINGS_FILE).read_text())
    s = summary["settings"]
    encoder = build_encoder(s["arch"], stem=s["stem"], width=s["width"], out_dim=s.get("out_dim"))
    encoder.load_state_dict(load_weights(out_dir))
    return encoder.to(device).eval(), summary


def load_weights(out_dir: str | Path) -> dict[str, torch.Tensor]:
    """The encoder state dict saved in ``out_dir`` (``encoder.safetensors`` or ``encoder.pt``), on the CPU."""
    out_dir = Path(out_dir)
    for name in ENCODER_FILES:
        path = out_dir / name
        if path.exists():
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                return load_file(path)
            return torch.load(path, map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{out_dir}: no encoder weights ({' or '.join(ENCODER_FILES)})")
