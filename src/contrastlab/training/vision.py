"""Contrastive pre-training of an image encoder (protocol.md §3; MACL App. B.3).

One short loop: each step takes a batch of images from a per-epoch permutation of the training split
(kept on the device as uint8), draws two SimCLR views of each on the device
(:class:`~contrastlab.training.augment.SimCLRAugment`), encodes both views in one forward pass of 2B
images (so BatchNorm sees the whole 2N batch, as SimCLR), projects them with the MLP head and applies
the loss to the two [B, head_dim] halves. Adam with MACL's learning-rate rule (lr x batch/256 above
256), a constant rate, weight decay 1e-6. bf16 autocast and channels-last on CUDA.

Snapshots (model, head, optimiser, the augmentation generator and every RNG, the log offset) every
``state_every`` steps make a killed job resume to a bit-identical encoder and log on CPU (the helpers
of :mod:`contrastlab.training.state`). The final encoder is written to ``out_dir/encoder.pt`` with
``settings.json`` (resolved settings, run information, package versions, git SHA); there is no
checkpoint selection (the papers evaluate the encoder after the last epoch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
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

from contrastlab.data.images import IMAGE_STATS, load_images
from contrastlab.losses import build_loss
from contrastlab.models import pick_device
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
from contrastlab.vision_models import ProjectionHead, build_encoder
from contrastlab.workflow import run_metadata

__all__ = [
    "ENCODER_FILE",
    "SETTINGS_FILE",
    "VisionTrainSettings",
    "effective_lr",
    "load_encoder",
    "train_vision",
]

ENCODER_FILE = "encoder.pt"
SETTINGS_FILE = "settings.json"


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
    image_size: int | None = None  # None: the dataset's own (CIFAR 32, digits 16)
    head_hidden: int = 512
    head_dim: int = 128  # protocol.md §3: 2-layer MLP head to 128-d
    epochs: int = 200  # App. B.3
    max_steps: int | None = None  # stop early (tests, presets)
    batch_size: int = 256
    optimizer: str = "adam"  # App. B.3: Adam replaces SimCLR's LARS
    lr: float = 1e-3  # App. B.3 base rate ...
    lr_reference_batch: int | None = 256  # ... x batch/256 for batches above 256; None: no scaling
    weight_decay: float = 1e-6  # App. B.3
    precision: str = "auto"  # auto: bf16 on CUDA, fp32 on CPU
    log_every: int = 50
    state_every: int = 500

    def __post_init__(self) -> None:
        if self.optimizer != "adam":
            raise ValueError(f"optimizer must be adam (MACL App. B.3), got {self.optimizer!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16, got {self.precision!r}")
        for name in ("batch_size", "epochs", "log_every", "state_every", "width", "head_hidden", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
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
        return {
            f.name: (dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v)
            for f in dataclasses.fields(self)
        }


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
    out_dir: Path, encoder: torch.nn.Module, summary: dict[str, Any], state_dir: Path, log_path: Path
) -> None:
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save({k: v.detach().cpu() for k, v in encoder.state_dict().items()}, tmp / ENCODER_FILE)
    (tmp / SETTINGS_FILE).write_text(json.dumps(summary, indent=1, default=float) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_log = log_path.with_name(log_path.name + ".partial")
    shutil.copyfile(state_dir / st.LOG_FILE, tmp_log)
    tmp_log.replace(log_path)


def train_step(encoder, head, loss_fn, optimizer, view1, view2, *, autocast, memory_format, with_stats: bool):
    """One optimiser step on two augmented views [B, 3, S, S]: both views through the encoder and head
    in one forward pass of 2B images (BatchNorm sees the whole 2N batch), the loss on the halves.
    Returns (loss output, h1, h2); the benchmark times exactly this."""
    x = torch.cat([view1, view2]).contiguous(memory_format=memory_format)
    with autocast():
        h1, h2 = head(encoder(x)).chunk(2)
    out = loss_fn(h1, h2, with_stats=with_stats)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out, h1, h2


def train_vision(
    settings: VisionTrainSettings,
    *,
    data_root: str | Path | None,
    out_dir: str | Path,
    log_path: str | Path,
    state_dir: str | Path,
    device: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train one vision cell; write the encoder to ``out_dir`` and the JSONL log to ``log_path``.

    ``data_root`` holds the CIFAR folders (unused for digits). ``state_dir`` holds snapshots while
    training (a rerun resumes from them; deleted on success). Returns the summary also written to
    ``out_dir/settings.json``.
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    out_dir, log_path, state_dir = map(Path, (out_dir, log_path, state_dir))
    s = settings
    dev = pick_device(device)
    precision = resolve_precision(s.precision, dev)
    autocast = autocast_for(precision, dev)
    channels_last = torch.channels_last if dev.type == "cuda" else torch.contiguous_format

    data = load_images(s.dataset, "train", root=data_root, image_size=s.image_size)
    n_images, size = len(data.labels), data.images.shape[-1]
    steps_per_epoch = n_images // s.batch_size  # drop_last: every step sees a full batch of negatives
    if steps_per_epoch == 0:
        raise ValueError(
            f"{s.dataset} has {n_images} training images, fewer than one batch of {s.batch_size}"
        )
    total_steps = s.max_steps if s.max_steps is not None else steps_per_epoch * s.epochs
    images = data.images.to(dev)
    mean, std = IMAGE_STATS[s.dataset]
    augment = SimCLRAugment(size, mean=mean, std=std)

    random.seed(s.seed)
    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    encoder = build_encoder(s.arch, stem=s.stem, width=s.width)
    head = ProjectionHead(encoder.feature_dim, s.head_hidden, s.head_dim)
    encoder.to(dev, memory_format=channels_last).train()
    head.to(dev).train()
    params = [*encoder.parameters(), *head.parameters()]
    lr = effective_lr(s)
    optimizer = torch.optim.Adam(params, lr=lr, weight_decay=s.weight_decay, fused=dev.type == "cuda" or None)
    loss_fn = build_loss(s.loss, **s.loss_hp)
    views = torch.Generator(device=dev).manual_seed(s.seed)  # the augmentations' draws

    fingerprint = hashlib.sha256(
        json.dumps([s.to_dict(), n_images, size], sort_keys=True).encode()
    ).hexdigest()[:16]
    saved = st.load_state(state_dir, fingerprint)
    log = JsonlLog(state_dir / st.LOG_FILE)
    timings = {"train_s": 0.0, "state_s": 0.0}
    run_info = {
        "device": str(dev),
        "device_name": device_name(dev),
        "precision": precision,
        "requested_precision": s.precision,
        "n_images": n_images,
        "image_size": size,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "effective_lr": lr,
        "feature_dim": encoder.feature_dim,
        "trainable_params": sum(p.numel() for p in params),
    }
    if saved is None:
        st.reset_state_dir(state_dir)
        step, resumed_from, interval = 0, [], (0.0, 0)
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
    order_epoch, order = -1, torch.empty(0, dtype=torch.long)
    while step < total_steps:
        step += 1
        epoch, position = divmod(step - 1, steps_per_epoch)
        if epoch != order_epoch:
            order_epoch = epoch
            order = torch.from_numpy(epoch_order(n_images, s.seed, epoch)).to(dev)
        batch = images[order[position * s.batch_size : (position + 1) * s.batch_size]]
        logging = step % s.log_every == 0 or step == total_steps
        snapshot = step % s.state_every == 0 and step < total_steps
        out, h1, h2 = train_step(
            encoder,
            head,
            loss_fn,
            optimizer,
            augment(batch, views),
            augment(batch, views),
            autocast=autocast,
            memory_format=channels_last,
            with_stats=logging,
        )
        loss = out.loss.detach()
        loss_sum += loss
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
                "stats": dict(out.stats),
                "steps_per_s": interval_steps / elapsed,
                "images_per_s": interval_steps * s.batch_size / elapsed,
            }
            log.write(record)
            bar.set_postfix(loss=f"{record['loss']:.4f}", refresh=False)
            loss_sum.zero_()
            interval_steps, interval_t, paused = 0, now, 0.0
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
                "interval": (loss_sum.item(), interval_steps),
            }
            st.save_state(state_dir, payload, {"step": step, "fingerprint": fingerprint})
            timings["state_s"] += time.perf_counter() - t
            paused += time.perf_counter() - t
    bar.close()

    timings["total_s"] = time.perf_counter() - started
    timings["images_per_s"] = total_steps * s.batch_size / timings["train_s"] if timings["train_s"] else None
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
    _write_encoder(out_dir, encoder, summary, state_dir, log_path)
    shutil.rmtree(state_dir, ignore_errors=True)
    return summary


def load_encoder(
    out_dir: str | Path, device: str | torch.device = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The trained encoder of ``out_dir`` (eval mode) and its ``settings.json`` summary."""
    out_dir = Path(out_dir)
    summary = json.loads((out_dir / SETTINGS_FILE).read_text())
    s = summary["settings"]
    encoder = build_encoder(s["arch"], stem=s["stem"], width=s["width"])
    encoder.load_state_dict(torch.load(out_dir / ENCODER_FILE, map_location="cpu", weights_only=True))
    return encoder.to(device).eval(), summary
