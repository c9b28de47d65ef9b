"""SimCLR's image augmentations on whole batches on the device, each image with its own random draw.

SimCLR (Chen et al. 2020, App. A; MACL App. B.3): random resized crop -> horizontal flip -> colour
jitter (brightness, contrast, saturation, hue, in a random order, applied with p 0.8) -> grayscale
(p 0.2). torchvision's transforms draw one set of parameters per call, so a batch tensor would share
them; here every draw is a tensor of per-image values and every operation is batched (no Python loop
over the images), so augmenting a CIFAR batch costs a few milliseconds on a GPU and data loading never
bounds an epoch. The colour operations follow ``torchvision.transforms.v2.functional``'s definitions
(tested against them image by image); the crop samples its box as ``RandomResizedCrop`` does (area
fraction uniform in ``scale``, log aspect ratio uniform in ``ratio``, ten tries, else the whole image
clipped to the ratio range) and resamples it bilinearly with one ``grid_sample`` call (no antialias, as
torchvision on tensors with ``antialias=False``; boxes are continuous rather than whole pixels).

Every random number comes from the ``generator`` passed in, so a saved generator state replays the
same augmentations (the trainer's resume relies on it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "SimCLRAugment",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_hue",
    "adjust_saturation",
    "eval_transform",
    "grayscale",
    "sample_crop_boxes",
]

#: ITU-R 601-2 luma, as torchvision's rgb_to_grayscale.
LUMA = (0.2989, 0.587, 0.114)
CROP_TRIES = 10


def _per_image(values: Tensor) -> Tensor:
    return values.reshape(-1, 1, 1, 1)


def grayscale(x: Tensor) -> Tensor:
    """Luma [B, 1, H, W] of RGB images in [0, 1]."""
    r, g, b = x.unbind(dim=-3)
    return (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b).unsqueeze(-3)


def adjust_brightness(x: Tensor, factor: Tensor) -> Tensor:
    """x * factor, clipped to [0, 1] (per-image ``factor`` [B])."""
    return (x * _per_image(factor)).clamp(0, 1)


def adjust_contrast(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the image's mean luma: factor * x + (1 - factor) * mean, clipped."""
    mean = grayscale(x).mean(dim=(-3, -2, -1), keepdim=True)
    f = _per_image(factor)
    return (f * x + (1 - f) * mean).clamp(0, 1)


def adjust_saturation(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the luma image: factor * x + (1 - factor) * gray, clipped."""
    f = _per_image(factor)
    return (f * x + (1 - f) * grayscale(x)).clamp(0, 1)


def _rgb_to_hsv(x: Tensor) -> Tensor:
    r, g, b = x.unbind(dim=-3)
    maxc, _ = x.max(dim=-3)
    minc, _ = x.min(dim=-3)
    equal = maxc == minc
    chroma = maxc - minc
    ones = torch.ones_like(maxc)
    s = chroma / torch.where(equal, ones, maxc)
    cr = torch.where(equal, ones, chroma)
    rc, gc, bc = (maxc - r) / cr, (maxc - g) / cr, (maxc - b) / cr
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.remainder(h / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv_to_rgb(x: Tensor) -> Tensor:
    h, s, v = x.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p = (v * (1.0 - s)).clamp(0, 1)
    q = (v * (1.0 - s * f)).clamp(0, 1)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0, 1)
    choices = {
        "r": (v, q, p, p, t, v),
        "g": (t, v, v, q, p, p),
        "b": (p, p, t, v, v, q),
    }
    out = []
    for channel in ("r", "g", "b"):
        value = torch.zeros_like(v)
        for sector, candidate in enumerate(choices[channel]):
            value = torch.where(i == sector, candidate, value)
        out.append(value)
    return torch.stack(out, dim=-3)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by ``shift`` (in turns, per image, in [-0.5, 0.5]) in HSV space."""
    hsv = _rgb_to_hsv(x)
    h = torch.remainder(hsv[:, 0] + shift.reshape(-1, 1, 1), 1.0)
    return _hsv_to_rgb(torch.stack((h, hsv[:, 1], hsv[:, 2]), dim=1))


def _uniform(n: int, low: float, high: float, generator: torch.Generator, device) -> Tensor:
    return low + (high - low) * torch.rand(n, generator=generator, device=device)


def sample_crop_boxes(
    n: int,
    height: int,
    width: int,
    *,
    scale: Sequence[float],
    ratio: Sequence[float],
    generator: torch.Generator,
    device,
) -> Tensor:
    """[n, 4] boxes (top, left, box height, box width) in pixels, drawn as RandomResizedCrop does."""
    area = height * width
    target = area * _uniform(n * CROP_TRIES, scale[0], scale[1], generator, device)
    log_ratio = _uniform(n * CROP_TRIES, math.log(ratio[0]), math.log(ratio[1]), generator, device)
    aspect = torch.exp(log_ratio)
    w = torch.sqrt(target * aspect).reshape(n, CROP_TRIES)
    h = torch.sqrt(target / aspect).reshape(n, CROP_TRIES)
    valid = (w <= width) & (h <= height)
    first = torch.where(
        valid.any(dim=1), valid.float().argmax(dim=1), torch.zeros_like(valid[:, 0], dtype=torch.long)
    )
    w, h = w.gather(1, first[:, None])[:, 0], h.gather(1, first[:, None])[:, 0]
    # No valid try: the whole image, clipped to the ratio range (torchvision's fallback).
    in_ratio = width / height
    fallback_w = (
        width if ratio[0] <= in_ratio <= ratio[1] else (width if in_ratio < ratio[0] else height * ratio[1])
    )
    fallback_h = (
        height if ratio[0] <= in_ratio <= ratio[1] else (width / ratio[0] if in_ratio < ratio[0] else height)
    )
    ok = valid.any(dim=1)
    w = torch.where(ok, w, torch.full_like(w, fallback_w))
    h = torch.where(ok, h, torch.full_like(h, fallback_h))
    top = torch.rand(n, generator=generator, device=device) * (height - h)
    left = torch.rand(n, generator=generator, device=device) * (width - w)
    return torch.stack((top, left, h, w), dim=1)


def _crop_and_flip(x: Tensor, boxes: Tensor, flip: Tensor, size: int) -> Tensor:
    """Bilinear resample of each box to ``size`` x ``size``, mirrored where ``flip``; one grid_sample."""
    n, _, height, width = x.shape
    top, left, h, w = boxes.unbind(dim=1)
    sign = torch.where(flip, -1.0, 1.0).to(x.dtype)
    theta = torch.zeros(n, 2, 3, dtype=x.dtype, device=x.device)
    theta[:, 0, 0] = sign * w / width
    theta[:, 0, 2] = (2 * left + w) / width - 1
    theta[:, 1, 1] = h / height
    theta[:, 1, 2] = (2 * top + h) / height - 1
    grid = F.affine_grid(theta, [n, x.shape[1], size, size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _to_unit(images: Tensor) -> Tensor:
    return images.float() / 255.0 if images.dtype == torch.uint8 else images.float()


def _normalize(x: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).reshape(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).reshape(1, -1, 1, 1)
    return (x - m) / s


class SimCLRAugment:
    """SimCLR's augmentation pipeline for a batch: ``aug(images, generator) -> [B, 3, size, size]``.

    ``images``: uint8 (or float in [0, 1]) [B, 3, H, W] on any device; the output is float32,
    normalised with ``mean``/``std``. Defaults are SimCLR's CIFAR-10 settings (crop scale 0.08-1,
    jitter strength 0.5: 0.4/0.4/0.4/0.1 with p 0.8, grayscale p 0.2, flip p 0.5).
    """

    def __init__(
        self,
        size: int,
        *,
        mean: Sequence[float],
        std: Sequence[float],
        crop_scale: Sequence[float] = (0.08, 1.0),
        crop_ratio: Sequence[float] = (3 / 4, 4 / 3),
        jitter: Sequence[float] = (0.4, 0.4, 0.4, 0.1),
        jitter_p: float = 0.8,
        gray_p: float = 0.2,
        flip_p: float = 0.5,
    ) -> None:
        self.size, self.mean, self.std = size, tuple(mean), tuple(std)
        self.crop_scale, self.crop_ratio = tuple(crop_scale), tuple(crop_ratio)
        self.jitter, self.jitter_p, self.gray_p, self.flip_p = tuple(jitter), jitter_p, gray_p, flip_p

    def __call__(self, images: Tensor, generator: torch.Generator) -> Tensor:
        x = _to_unit(images)
        n, _, height, width = x.shape
        dev = x.device
        boxes = sample_crop_boxes(
            n, height, width, scale=self.crop_scale, ratio=self.crop_ratio, generator=generator, device=dev
        )
        flip = torch.rand(n, generator=generator, device=dev) < self.flip_p
        x = _crop_and_flip(x, boxes, flip, self.size)

        b, c, s, h = self.jitter
        jitter_on = torch.rand(n, generator=generator, device=dev) < self.jitter_p
        factors = [
            _uniform(n, max(0.0, 1 - b), 1 + b, generator, dev),
            _uniform(n, max(0.0, 1 - c), 1 + c, generator, dev),
            _uniform(n, max(0.0, 1 - s), 1 + s, generator, dev),
            _uniform(n, -h, h, generator, dev),
        ]
        order = torch.rand(n, 4, generator=generator, device=dev).argsort(dim=1)  # a permutation per image
        ops = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
        for position in range(4):
            for op_index, op in enumerate(ops):
                chosen = jitter_on & (order[:, position] == op_index)
                x = torch.where(_per_image(chosen), op(x, factors[op_index]), x)

        gray = torch.rand(n, generator=generator, device=dev) < self.gray_p
        x = torch.where(_per_image(gray), grayscale(x).expand_as(x), x)
        return _normalize(x, self.mean, self.std).contiguous()


def eval_transform(images: Tensor, *, size: int, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """Images for feature extraction: to [0, 1], resized to ``size`` if needed (bilinear), normalised."""
    x = _to_unit(images)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return _normalize(x, mean, std)
