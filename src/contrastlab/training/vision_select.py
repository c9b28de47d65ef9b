"""The vision trainer's ``keep: best_val_loss``: the encoder of the epoch with the lowest contrastive
loss on a held-out share of the training split (the OAR authors' ``ModelCheckpoint(monitor="val_loss")``),
chosen by :func:`~contrastlab.training.vision.train_vision` after every epoch."""

from __future__ import annotations

import math
from typing import Any

import torch

from contrastlab.data.images import validation_split
from contrastlab.precision import ieee_fp32
from contrastlab.training import state as st
from contrastlab.training.augment import two_views
from contrastlab.training.runtime import TrainingRun

__all__ = ["BEST_ENCODER", "ValSelection"]

BEST_ENCODER = "best-encoder.pt"  # in the state folder: the kept encoder so far (keep: best_val_loss)


class ValSelection:
    """``keep: best_val_loss``: after every epoch, the contrastive loss (without the OAR term, as the
    authors' ``validation_step``) of two augmented views of the held-out images in eval mode, averaged
    over images; the lowest epoch's encoder is kept (``best-encoder.pt``) and becomes the cell's. It
    runs in IEEE fp32 whatever the cell's precision, so every precision is selected on the same
    arithmetic, and its views come from a generator seeded by (seed, epoch): training's draws are
    untouched and a resumed run validates identically."""

    def __init__(self, s, run: TrainingRun, images, parts) -> None:
        self.s, self.run, self.augment, self.loss_fn = s, run, parts.augment, parts.loss_fn
        self.encoder, self.head, self.memory_format = parts.encoder, parts.head, parts.memory_format
        self.images = images[validation_split(len(images), s.val_fraction, s.seed).to(images.device)]
        self.best, self.kept_epoch, self.losses = math.inf, None, []

    def state(self) -> dict[str, Any]:
        return {"val_best": self.best, "val_kept_epoch": self.kept_epoch, "val_losses": self.losses}

    def restore(self, saved: dict[str, Any]) -> None:
        self.best, self.kept_epoch, self.losses = (saved[key] for key in self.state())

    def __call__(self, step: int, epoch: int) -> None:
        run, s = self.run, self.s
        with run.pause("val_s"):
            generator = torch.Generator(device=run.device).manual_seed(s.seed * 1_000_003 + epoch)
            self.encoder.eval(), self.head.eval()
            # The sum stays on the device in float64 (one host sync per validation, not one per batch:
            # docs/gpu-defects.md, G9); the same float32 losses summed in the same order in float64 as
            # Python floats would, so the result is the same number.
            total, count = torch.zeros((), dtype=torch.float64, device=run.device), 0
            with torch.no_grad(), ieee_fp32():
                for start in range(0, len(self.images), s.batch_size):
                    batch = self.images[start : start + s.batch_size]
                    if len(batch) < 2:  # no negatives
                        continue
                    v1, v2 = two_views(self.augment, batch, generator, s.augment_calls)
                    x = torch.cat([v1, v2]).contiguous(memory_format=self.memory_format)
                    h1, h2 = self.head(self.encoder(x)).float().chunk(2)
                    loss = self.loss_fn(h1, h2, with_stats=False).loss.detach()
                    total = total + loss.to(torch.float64) * len(batch)
                    count += len(batch)
            self.encoder.train(), self.head.train()
            loss = total.item() / count
            self.losses.append(loss)
            if loss < self.best:
                self.best, self.kept_epoch = loss, epoch
                weights = {k: v.detach().cpu().clone() for k, v in self.encoder.state_dict().items()}
                st.atomic_write_bytes(
                    run.state_dir / BEST_ENCODER, lambda handle: torch.save(weights, handle)
                )
            record = {"event": "val", "step": step, "epoch": epoch, "val_loss": loss}
            run.log.write(record | {"best_val_loss": self.best, "kept_epoch": self.kept_epoch})

    def load_kept(self) -> None:
        weights = torch.load(self.run.state_dir / BEST_ENCODER, map_location="cpu", weights_only=True)
        self.encoder.load_state_dict(weights)

    def summary(self) -> dict[str, Any]:
        return {"kept_epoch": self.kept_epoch, "val_losses": self.losses, "val_images": len(self.images)}
