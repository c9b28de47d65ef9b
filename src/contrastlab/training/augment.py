"""SimCLR's image augmentations on whole batches on the device, each image with its own random draw.

SimCLR (Chen et al. 2020, App. A; used by MACL, App. B.3) augments every image with, in this order:
``RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3))``, ``RandomHorizontalFlip(p=0.5)``,
``RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)`` (the four operations in a random order per
image), ``RandomGrayscale(p=0.2)``, optionally (``blur_p`` > 0, off by default) a Gaussian blur with
σ ~ U(``blur_sigma``) (SimCLR's ImageNet augmentation and lightly's ``SimCLRTransform`` default, which
the OAR authors' code trains with), then ``ToTensor`` and ``Normalize``. Every draw here is a tensor of
per-image values and every operation is batched (loops never run over images), so a CIFAR batch costs
milliseconds on a GPU.

Each operation has ``torchvision.transforms.v2``'s semantics on float images in [0, 1] (the tests compare
each, and the pipeline, with torchvision image by image). Known differences from SimCLR's 8-bit PIL
pipeline: float32 throughout (no rounding between operations), no antialiasing (no difference when a
crop is enlarged, always the case for CIFAR), and lightly's Pillow box-blur approximation of the
Gaussian is not reproduced.

Every random number comes from the ``generator`` passed in, so a saved generator state replays the
same augmentations (the trainer's resume relies on it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastlab.data.transforms import constant as _constant
from contrastlab.data.transforms import normalize as _normalize
from contrastlab.data.transforms import to_unit as _to_unit

__all__ = [
    "AugmentParams",
    "SimCLRAugment",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_hue",
    "adjust_saturation",
    "color_jitter",
    "gaussian_blur",
    "gaussian_kernels",
    "grayscale",
    "hsv_to_rgb",
    "resized_crop",
    "rgb_to_hsv",
    "sample_crop_boxes",
    "two_views",
]

#: ITU-R 601-2 luma weights, as torchvision's rgb_to_grayscale.
LUMA = (0.2989, 0.587, 0.114)
#: RandomResizedCrop's number of tries before its centre-crop fallback.
CROP_TRIES = 10
#: Index of each colour operation in ``AugmentParams.factors`` and ``AugmentParams.order``.
BRIGHTNESS, CONTRAST, SATURATION, HUE = range(4)


def _per_image(values: Tensor) -> Tensor:
    return values.reshape(-1, 1, 1, 1)


# --- colour operations (batched; torchvision.transforms.v2.functional semantics, float images) -------


def grayscale(x: Tensor) -> Tensor:
    """Luma [B, 1, H, W] of RGB images [B, 3, H, W] in [0, 1] (torchvision's ``rgb_to_grayscale``)."""
    r, g, b = x.unbind(dim=-3)
    return r.mul(LUMA[0]).add_(g, alpha=LUMA[1]).add_(b, alpha=LUMA[2]).unsqueeze(-3)


def _blend(x: Tensor, other: Tensor, factor: Tensor) -> Tensor:
    """factor * x + (1 - factor) * other, clipped to [0, 1]: torchvision's ``_blend`` per image."""
    f = _per_image(factor)
    return torch.addcmul(other * (1 - f), x, f).clamp_(0, 1)  # one pass for x * f + ...


def adjust_brightness(x: Tensor, factor: Tensor) -> Tensor:
    """``x * factor`` clipped to [0, 1], one factor per image (``factor`` [B], >= 0)."""
    return (x * _per_image(factor)).clamp_(0, 1)


def adjust_contrast(x: Tensor, factor: Tensor) -> Tensor:
    """Blend each image with the mean of its luma: ``factor * x + (1 - factor) * mean``, clipped."""
    return _blend(x, grayscale(x).mean(dim=(-3, -2, -1), keepdim=True), factor)


def adjust_saturation(x: Tensor, factor: Tensor) -> Tensor:
    """Blend each image with its luma image: ``factor * x + (1 - factor) * gray``, clipped."""
    return _blend(x, grayscale(x), factor)


def rgb_to_hsv(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Hue (in turns, [0, 1)), saturation and value planes [B, H, W] of RGB images [B, 3, H, W].

    torchvision's ``_rgb_to_hsv``: where max == min the denominators are replaced by 1 (an added 0/1
    mask, exact where ``torch.where`` would be and cheaper), so grey pixels get hue 0 and saturation 0."""
    r, g, _ = x.unbind(dim=1)
    maxc, minc = x.amax(dim=1), x.amin(dim=1)
    equal = maxc == minc
    spread = maxc - minc
    s = spread / (maxc + equal)
    rc, gc, bc = ((maxc.unsqueeze(1) - x) / (spread + equal).unsqueeze(1)).unbind(dim=1)
    # Which channel is the maximum, r before g before b on ties; 0/1 float masks (exact products, and
    # faster than multiplying by bool tensors).
    max_is_r = (maxc == r).to(x.dtype)
    max_is_g = (maxc == g).to(x.dtype) * (1.0 - max_is_r)
    max_is_b = 1.0 - max_is_r - max_is_g
    h = (bc - gc) * max_is_r + (rc + 2.0 - bc) * max_is_g + (gc + 4.0 - rc) * max_is_b
    h = torch.fmod(h * (1.0 / 6.0) + 1.0, 1.0)
    return h, s, maxc


#: For each hue sector 0..5, which of (v, p, q, t) becomes R, G and B (torchvision's ``_hsv_to_rgb``).
#: Row 6 repeats row 0: ``floor(6 h)`` is 6 when h rounds up within an ulp of 1, and torchvision takes
#: the sector modulo 6 (the extra row saves that pass).
_SECTOR_SOURCES = ((0, 3, 1), (2, 0, 1), (1, 0, 3), (1, 2, 0), (3, 1, 0), (0, 1, 2), (0, 3, 1))


def hsv_to_rgb(h: Tensor, s: Tensor, v: Tensor) -> Tensor:
    """RGB images [B, 3, H, W] from hue (turns), saturation and value planes [B, H, W]: the inverse of
    :func:`rgb_to_hsv`, torchvision's sector formula (each channel is one of v, p, q, t)."""
    h6 = h * 6.0
    sector = torch.floor(h6)
    frac = h6 - sector
    sf = s * frac
    one_minus_s = 1.0 - s
    p = (one_minus_s * v).clamp_(0, 1)
    q = ((1.0 - sf) * v).clamp_(0, 1)
    t = ((sf + one_minus_s) * v).clamp_(0, 1)
    vpqt = torch.stack((v, p, q, t), dim=1)
    table = _constant(_SECTOR_SOURCES, h.device, torch.int64)
    # The per-pixel table lookup as an embedding: several times faster than advanced indexing on CPU.
    index = F.embedding(sector.to(torch.int64), table).permute(0, 3, 1, 2)  # [B, 3, H, W]
    return vpqt.gather(1, index)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate each image's hue by ``shift`` (turns, per image, in [-0.5, 0.5]) in HSV space."""
    h, s, v = rgb_to_hsv(x)
    return hsv_to_rgb(torch.remainder(h + shift.reshape(-1, 1, 1), 1.0), s, v)


def _blend_step(x: Tensor, op: Tensor, factors: Tensor, active: Tensor) -> Tensor:
    """One jitter position for the whole batch: brightness, contrast or saturation (``op`` [B]) where
    ``active``, identity elsewhere: one blend ``f * x + (1 - f) * target`` with target 0, the mean luma or
    the luma image chosen by exact 0/1 weights (``f = 1`` for inactive images)."""
    f = factors.gather(1, op.clamp(max=SATURATION).unsqueeze(1)).squeeze(1)
    f = torch.where(active, f, torch.ones_like(f))
    # (1 - f) * target, with the 0/1 choice of target folded into per-image weights (exact products).
    to_mean = _per_image((active & (op == CONTRAST)).to(x.dtype) * (1 - f))
    to_gray = _per_image((active & (op == SATURATION)).to(x.dtype) * (1 - f))
    gray = grayscale(x)
    weighted = (gray * to_gray).add_(gray.mean(dim=(-3, -2, -1), keepdim=True) * to_mean)
    return torch.addcmul(weighted, x, _per_image(f)).clamp_(0, 1)


def color_jitter(x: Tensor, factors: Tensor, order: Tensor, applied: Tensor, *, hue: bool = True) -> Tensor:
    """``ColorJitter`` per image: the operations ``order[i]`` (a permutation of BRIGHTNESS, CONTRAST,
    SATURATION, HUE) with ``factors[i]`` [4], on the images where ``applied``; the others unchanged.
    Each image's sequence is split at its hue, so the costly hue runs once for the whole batch;
    ``hue=False`` skips it (ColorJitter with hue 0 never calls it)."""
    hue_at = (order == HUE).to(torch.int64).argmax(dim=1)
    for position in range(3):
        x = _blend_step(x, order[:, position], factors, applied & (hue_at > position))
    if hue:
        x = torch.where(_per_image(applied), adjust_hue(x, factors[:, HUE]), x)
    for position in range(1, 4):
        x = _blend_step(x, order[:, position], factors, applied & (hue_at < position))
    return x


# --- blur -----------------------------------------------------------------------------------------


def gaussian_kernels(sigma: Tensor, kernel_size: int) -> Tensor:
    """float32 [B, K] normalised 1-D Gaussian kernels, one per σ in ``sigma`` [B]: torchvision's
    ``_get_gaussian_kernel1d`` (taps at offsets -(K-1)/2 ... (K-1)/2, weights exp(-x²/2σ²) / sum)."""
    half = (kernel_size - 1) / 2
    x = torch.linspace(-half, half, kernel_size, device=sigma.device, dtype=torch.float32)
    return torch.softmax(-0.5 * (x / sigma.to(torch.float32).unsqueeze(1)) ** 2, dim=1)


def gaussian_blur(x: Tensor, sigma: Tensor, kernel_size: int) -> Tensor:
    """Each image of ``x`` [B, C, H, W] blurred with its own σ (``sigma`` [B]): torchvision's
    ``gaussian_blur(image, [K, K], [σ, σ])`` per image (reflect padding by K // 2, which must be
    smaller than H and W), computed as a vertical then a horizontal depthwise 1-D convolution (the
    2-D kernel is their outer product)."""
    b, c, h, w = x.shape
    pad = kernel_size // 2
    weight = gaussian_kernels(sigma, kernel_size).to(x.dtype).repeat_interleave(c, dim=0)  # [B*C, K]
    y = F.pad(x.reshape(1, b * c, h, w), (pad, pad, pad, pad), mode="reflect")
    y = F.conv2d(y, weight.view(b * c, 1, kernel_size, 1), groups=b * c)
    y = F.conv2d(y, weight.view(b * c, 1, 1, kernel_size), groups=b * c)
    return y.reshape(b, c, h, w)


# --- crop -----------------------------------------------------------------------------------------


def _uniform(shape: tuple[int, ...], low: float, high: float, generator: torch.Generator, device) -> Tensor:
    return low + (high - low) * torch.rand(shape, generator=generator, device=device)


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
    """int64 [n, 4] boxes (top, left, box height, box width) in whole pixels, distributed as
    ``RandomResizedCrop.get_params``: ten tries of (area fraction ~ U(scale), log ratio ~ U(log ratio)),
    rounded, the first that fits; if none does, the centre crop of the image clipped to the ratio range.
    """
    area = height * width
    target = area * _uniform((n, CROP_TRIES), scale[0], scale[1], generator, device)
    aspect = torch.exp(_uniform((n, CROP_TRIES), math.log(ratio[0]), math.log(ratio[1]), generator, device))
    w = torch.round(torch.sqrt(target * aspect))
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.to(torch.int64).argmax(dim=1, keepdim=True)  # the first try that fits (argmax: first max)
    found = fits.any(dim=1)
    w, h = w.gather(1, first).squeeze(1), h.gather(1, first).squeeze(1)
    offset = torch.rand((n, 2), generator=generator, device=device)
    # torch.randint(0, height - h + 1) of torchvision, as floor(u * count); min() guards u * count == count.
    top = torch.minimum(torch.floor(offset[:, 0] * (height - h + 1)), height - h)
    left = torch.minimum(torch.floor(offset[:, 1] * (width - w + 1)), width - w)
    # torchvision's fallback: the whole image, clipped to the ratio range, centred.
    in_ratio = width / height
    if in_ratio < min(ratio):
        fallback_w, fallback_h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        fallback_w, fallback_h = round(height * max(ratio)), height
    else:
        fallback_w, fallback_h = width, height
    fallback = _constant(
        ((height - fallback_h) // 2, (width - fallback_w) // 2, fallback_h, fallback_w), w.device, w.dtype
    )
    boxes = torch.stack((top, left, h, w), dim=1)
    return torch.where(found.unsqueeze(1), boxes, fallback).to(torch.int64)


def _source_coords(start: Tensor, length: Tensor, size: int) -> Tensor:
    """[B, size] input coordinates (pixel centres at integers) that ``F.interpolate(bilinear,
    align_corners=False)`` reads for each output pixel when resizing a ``length``-pixel span starting at
    ``start`` to ``size``: ``scale * (o + 0.5) - 0.5`` clamped to the span, so its edge pixels repeat."""
    o = torch.arange(size, dtype=torch.float32, device=start.device) + 0.5
    local = (length / size).unsqueeze(1) * o - 0.5
    local = torch.minimum(local.clamp_(min=0), (length - 1).unsqueeze(1))
    return start.unsqueeze(1) + local


def resized_crop(x: Tensor, boxes: Tensor, flip: Tensor, size: int) -> Tensor:
    """Each image's box (``boxes`` [B, 4]: top, left, height, width) resampled bilinearly to ``size`` x
    ``size`` and mirrored where ``flip`` [B]: ``horizontal_flip(resized_crop(x, *box, [size, size],
    antialias=False))`` per image, as one ``grid_sample`` call on a separable grid (an affine grid would
    read pixels outside the box at its border, where torch's resize repeats the edge pixels)."""
    n, _, height, width = x.shape
    top, left, h, w = boxes.to(torch.float32).unbind(dim=1)
    rows = _source_coords(top, h, size)
    cols = _source_coords(left, w, size)
    cols = torch.where(flip.unsqueeze(1), cols.flip(1), cols)
    # grid_sample's normalised coordinates (align_corners=False): pixel centre c -> (2c + 1) / side - 1.
    gy = ((2 * rows + 1) / height - 1).to(x.dtype)
    gx = ((2 * cols + 1) / width - 1).to(x.dtype)
    grid = torch.stack((gx.unsqueeze(1).expand(n, size, size), gy.unsqueeze(2).expand(n, size, size)), -1)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


# --- pipeline -------------------------------------------------------------------------------------


def _check_pair(name: str, pair: Sequence[float], low: float, high: float) -> tuple[float, float]:
    if len(pair) != 2 or not (low < pair[0] <= pair[1] <= high):
        raise ValueError(f"{name} must be (lo, hi) with {low} < lo <= hi <= {high}, got {tuple(pair)}")
    return float(pair[0]), float(pair[1])


@dataclass(frozen=True)
class AugmentParams:
    """Per-image draws of :class:`SimCLRAugment` for a batch of B images (all on the images' device).

    ``boxes`` int64 [B, 4] (top, left, height, width); ``flip`` bool [B]; ``jitter`` bool [B] (colour
    jitter applied); ``factors`` float32 [B, 4] (brightness, contrast, saturation factors, hue shift);
    ``order`` int64 [B, 4] (the operation at each jitter position, a permutation of 0..3); ``gray`` bool
    [B]; ``blur`` bool [B] and ``blur_sigma`` float32 [B] (None when the pipeline has no blur).
    """

    boxes: Tensor
    flip: Tensor
    jitter: Tensor
    factors: Tensor
    order: Tensor
    gray: Tensor
    blur: Tensor | None = None
    blur_sigma: Tensor | None = None


class SimCLRAugment:
    """SimCLR's augmentation pipeline for a batch: ``aug(images, generator) -> [B, 3, size, size]``.

    ``images``: uint8 (or float in [0, 1]) [B, 3, H, W] on any device; ``generator`` a ``torch.Generator``
    on that device, the only source of randomness. The output is float32, contiguous, normalised with
    ``mean``/``std``. Defaults are SimCLR's CIFAR-10 settings (Chen et al. 2020, App. A); ``blur_p`` > 0
    adds the Gaussian blur after the grayscale (lightly's defaults: ``blur_p=0.5, blur_sigma=(0.1, 2)``),
    and with ``blur_p=0`` no blur parameter is drawn, so every view is that of a pipeline without blur.
    ``sample`` and ``apply`` expose the two halves (draws, then the pure function of them).

    >>> aug = SimCLRAugment(8, mean=(0.5,) * 3, std=(0.25,) * 3)
    >>> images = torch.zeros(4, 3, 10, 10, dtype=torch.uint8)
    >>> aug(images, torch.Generator().manual_seed(0)).shape
    torch.Size([4, 3, 8, 8])"""

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
        blur_p: float = 0.0,
        blur_sigma: Sequence[float] = (0.1, 2.0),
        blur_kernel: int | None = None,
    ) -> None:
        if int(size) != size or size < 1:
            raise ValueError(f"size must be a positive integer, got {size}")
        if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
            raise ValueError(f"mean and std need 3 values each, std > 0; got mean={mean}, std={std}")
        if len(jitter) != 4 or min(jitter) < 0 or jitter[3] > 0.5:
            raise ValueError(
                f"jitter must be (brightness, contrast, saturation, hue) >= 0 with hue <= 0.5, got {jitter}"
            )
        for name, p in (("jitter_p", jitter_p), ("gray_p", gray_p), ("flip_p", flip_p), ("blur_p", blur_p)):
            if not 0 <= p <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        self.blur_sigma = _check_pair("blur_sigma", blur_sigma, 0.0, math.inf)
        if blur_kernel is None:
            blur_kernel = 2 * math.ceil(3 * self.blur_sigma[1]) + 1
        if int(blur_kernel) != blur_kernel or blur_kernel < 1 or blur_kernel % 2 == 0:
            raise ValueError(f"blur_kernel must be an odd positive integer, got {blur_kernel}")
        if blur_p > 0 and blur_kernel // 2 >= size:
            raise ValueError(
                f"blur_kernel {blur_kernel} needs images larger than {blur_kernel // 2} pixels (reflect "
                f"padding), got size {size}; use a smaller blur_kernel or blur_sigma"
            )
        self.blur_p, self.blur_kernel = float(blur_p), int(blur_kernel)
        self.size, self.mean, self.std = int(size), tuple(mean), tuple(std)
        self.crop_scale = _check_pair("crop_scale", crop_scale, 0.0, 1.0)
        self.crop_ratio = _check_pair("crop_ratio", crop_ratio, 0.0, math.inf)
        self.jitter = tuple(float(v) for v in jitter)
        self.jitter_p, self.gray_p, self.flip_p = jitter_p, gray_p, flip_p

    def sample(self, n: int, height: int, width: int, generator: torch.Generator) -> AugmentParams:
        """Draw every image's parameters from ``generator`` (on the device they are made on)."""
        dev = generator.device
        boxes = sample_crop_boxes(
            n, height, width, scale=self.crop_scale, ratio=self.crop_ratio, generator=generator, device=dev
        )
        flip = torch.rand(n, generator=generator, device=dev) < self.flip_p
        jitter = torch.rand(n, generator=generator, device=dev) < self.jitter_p
        b, c, s, h = self.jitter
        low = _constant((max(0.0, 1 - b), max(0.0, 1 - c), max(0.0, 1 - s), -h), dev, torch.float32)
        high = _constant((1 + b, 1 + c, 1 + s, h), dev, torch.float32)
        factors = low + (high - low) * torch.rand((n, 4), generator=generator, device=dev)
        order = torch.rand((n, 4), generator=generator, device=dev).argsort(dim=1)  # a uniform permutation
        gray = torch.rand(n, generator=generator, device=dev) < self.gray_p
        if self.blur_p == 0:  # draw nothing: the views of a pipeline without blur, unchanged
            return AugmentParams(boxes, flip, jitter, factors, order, gray)
        blur = torch.rand(n, generator=generator, device=dev) < self.blur_p
        sigma = _uniform((n,), *self.blur_sigma, generator, dev)
        return AugmentParams(boxes, flip, jitter, factors, order, gray, blur, sigma)

    def apply(self, images: Tensor, params: AugmentParams) -> Tensor:
        """The pipeline with given draws: crop + flip, colour jitter, grayscale, blur, normalisation."""
        x = resized_crop(_to_unit(images), params.boxes, params.flip, self.size)
        x = color_jitter(x, params.factors, params.order, params.jitter, hue=self.jitter[HUE] > 0)
        x = torch.where(_per_image(params.gray), grayscale(x).expand_as(x), x)
        if params.blur is not None:
            x = torch.where(_per_image(params.blur), gaussian_blur(x, params.blur_sigma, self.blur_kernel), x)
        return _normalize(x, self.mean, self.std).contiguous()

    def __call__(self, images: Tensor, generator: torch.Generator) -> Tensor:
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be [B, 3, H, W], got {tuple(images.shape)}")
        n, _, height, width = images.shape
        return self.apply(images, self.sample(n, height, width, generator))


def two_views(
    augment: SimCLRAugment, images: torch.Tensor, generator: torch.Generator, calls: str = "two"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two SimCLR views of ``images`` [B, 3, H, W]: ``calls="two"`` one augmentation call per view (the
    first view's draws, then the second's); ``"one"`` one call on the batch twice over (2B images, each
    with its own draws: the same distribution of view pairs, half the kernel launches, other views for
    a generator state)."""
    if calls == "one":
        return augment(torch.cat([images, images]), generator).chunk(2)
    return augment(images, generator), augment(images, generator)
