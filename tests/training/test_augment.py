"""SimCLR augmentations on batches: each operation and the pipeline equal torchvision's image by image;
the draws follow torchvision's distributions, per image, deterministic given the generator."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torchvision.transforms import RandomResizedCrop
from torchvision.transforms.v2 import functional as TF

from contrastlab.training import augment as A


def _images(n: int, height: int, width: int, seed: int) -> torch.Tensor:
    """Float images in [0, 1] with the cases HSV treats apart: grey pixels, ties between channels, 0, 1."""
    x = torch.rand(n, 3, height, width, generator=torch.Generator().manual_seed(seed))
    x[:, :, :2] = x[:, :1, :2]  # grey rows (max == min)
    x[:, 1, 2:4] = x[:, 0, 2:4]  # r == g
    x[:, 2, 4:6] = x[:, 1, 4:6]  # g == b
    x[:, :, 6, :3] = 0.0
    x[:, :, 7, :3] = 1.0
    return x


IMAGES = _images(6, 20, 20, 0)
#: Each colour operation: ours and torchvision's.
OPS = {
    A.BRIGHTNESS: (A.adjust_brightness, TF.adjust_brightness),
    A.CONTRAST: (A.adjust_contrast, TF.adjust_contrast),
    A.SATURATION: (A.adjust_saturation, TF.adjust_saturation),
    A.HUE: (A.adjust_hue, TF.adjust_hue),
}

FACTORS = {
    A.BRIGHTNESS: (1.35, 0.6),
    A.CONTRAST: (0.65, 1.4),
    A.SATURATION: (1.3, 0.0),
    A.HUE: (0.09, -0.1, 0.5),
}


@pytest.mark.parametrize(("op", "factor"), [(op, f) for op, factors in FACTORS.items() for f in factors])
def test_colour_operations_equal_torchvision_per_image(op, factor):
    ours, theirs = OPS[op]
    got = ours(IMAGES, torch.full((len(IMAGES),), factor))
    expected = torch.stack([theirs(image, factor) for image in IMAGES])
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("op", list(OPS))
def test_per_image_factors_are_applied_to_their_own_image(op):
    low, high = (-0.4, 0.45) if op == A.HUE else (0.6, 1.4)
    factors = torch.linspace(low, high, len(IMAGES))
    ours, theirs = OPS[op]
    for image, factor, out in zip(IMAGES, factors.tolist(), ours(IMAGES, factors), strict=True):
        torch.testing.assert_close(out, theirs(image, factor), atol=1e-6, rtol=0)


def test_hsv_round_trip_and_grayscale():
    h, s, v = A.rgb_to_hsv(IMAGES)
    assert h.shape == (6, 20, 20) and float(h.min()) >= 0 and float(h.max()) < 1
    assert (s[:, :2] == 0).all() and (h[:, :2] == 0).all()  # grey pixels: no hue, no saturation
    torch.testing.assert_close(A.hsv_to_rgb(h, s, v), IMAGES, atol=2e-6, rtol=0)
    torch.testing.assert_close(A.grayscale(IMAGES), TF.rgb_to_grayscale(IMAGES), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "box",
    [(3, 5, 12, 10), (0, 0, 20, 28), (7, 1, 5, 27), (0, 20, 20, 8), (19, 27, 1, 1)],
)
@pytest.mark.parametrize("size", [16, 6, 40])
def test_crop_equals_torchvision_resized_crop(box, size):
    x = _images(3, 20, 28, 1)
    boxes = torch.tensor(box).expand(len(x), 4)
    flip = torch.tensor([False, True, False])
    got = A.resized_crop(x, boxes, flip, size)
    expected = TF.resized_crop(x, *box, [size, size], antialias=False)
    expected[1] = TF.horizontal_flip(expected[1])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def _simclr_boxes(n: int, height: int, width: int, seed: int, scale=(0.08, 1.0)) -> torch.Tensor:
    """``n`` crop boxes drawn with SimCLR's ratio range (and by default its scale range)."""
    generator = torch.Generator().manual_seed(seed)
    return A.sample_crop_boxes(
        n, height, width, scale=scale, ratio=(3 / 4, 4 / 3), generator=generator, device="cpu"
    )


def test_crop_boxes_are_whole_pixels_inside_the_image():
    height, width, n = 24, 32, 20000
    boxes = _simclr_boxes(n, height, width, seed=1)
    assert boxes.dtype == torch.int64 and boxes.shape == (n, 4)
    top, left, h, w = boxes.unbind(1)
    assert (top >= 0).all() and (left >= 0).all() and (h >= 1).all() and (w >= 1).all()
    assert (top + h <= height).all() and (left + w <= width).all()
    # area and ratio within the ranges up to the rounding of w and h to whole pixels (+-0.5 each)
    assert ((w + 0.5) * (h + 0.5) >= 0.08 * height * width).all()
    assert (((w + 0.5) / (h - 0.5) >= 3 / 4) & ((w - 0.5) / (h + 0.5) <= 4 / 3)).all()
    assert len({tuple(b) for b in boxes[:200].tolist()}) > 150  # every image its own box


def test_crop_boxes_are_distributed_as_torchvisions():
    from scipy.stats import ks_2samp

    height, width = 32, 32
    ours = _simclr_boxes(20000, height, width, seed=2).float()
    image = torch.zeros(3, height, width)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        theirs = torch.tensor(
            [RandomResizedCrop.get_params(image, [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(3000)]
        ).float()
    for column, name in enumerate(("top", "left", "height", "width")):
        assert ks_2samp(ours[:, column], theirs[:, column]).pvalue > 1e-3, name
    area_ours, area_theirs = (b[:, 2] * b[:, 3] / (height * width) for b in (ours, theirs))
    assert ks_2samp(area_ours, area_theirs).pvalue > 1e-3
    assert abs(area_ours.mean() - area_theirs.mean()) < 0.02


@pytest.mark.parametrize(
    ("height", "width", "scale"), [(8, 32, (0.9, 1.0)), (32, 8, (0.9, 1.0)), (10, 10, (2.0, 3.0))]
)
def test_crop_fallback_is_torchvisions_centre_crop(height, width, scale):
    """No try fits (the box would exceed the image): the whole image clipped to the ratio range, centred."""
    boxes = _simclr_boxes(50, height, width, seed=4, scale=scale)
    expected = RandomResizedCrop.get_params(torch.zeros(3, height, width), list(scale), [3 / 4, 4 / 3])
    assert (boxes == torch.tensor(expected)).all()


def _torchvision_pipeline(x, params, aug, *, hue=True):
    """The same draws applied image by image with torchvision.transforms.v2.functional."""
    out = []
    for i, image in enumerate(x):
        top, left, h, w = params.boxes[i].tolist()
        y = TF.resized_crop(image, top, left, h, w, [aug.size, aug.size], antialias=False)
        if params.flip[i]:
            y = TF.horizontal_flip(y)
        if params.jitter[i]:
            for op in params.order[i].tolist():
                if op != A.HUE or hue:
                    y = OPS[op][1](y, params.factors[i, op].item())
        if params.gray[i]:
            y = TF.rgb_to_grayscale(y, num_output_channels=3)
        if params.blur is not None and params.blur[i]:
            sigma = params.blur_sigma[i].item()
            y = TF.gaussian_blur(y, [aug.blur_kernel, aug.blur_kernel], [sigma, sigma])
        out.append(TF.normalize(y, list(aug.mean), list(aug.std)))
    return torch.stack(out)


def test_whole_pipeline_equals_torchvision_image_by_image_in_every_jitter_order():
    aug = A.SimCLRAugment(16, mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
    x = _images(48, 20, 28, 5)
    drawn = aug.sample(len(x), 20, 28, torch.Generator().manual_seed(6))
    # every one of the 24 orders, twice; jitter on for all but a few, so each order is exercised
    order = torch.tensor(list(itertools.permutations(range(4))) * 2)
    jitter = torch.ones(len(x), dtype=torch.bool)
    jitter[::7] = False
    params = A.AugmentParams(drawn.boxes, drawn.flip, jitter, drawn.factors, order, drawn.gray)
    torch.testing.assert_close(aug.apply(x, params), _torchvision_pipeline(x, params, aug), atol=2e-5, rtol=0)
    # ColorJitter with hue 0 never calls adjust_hue
    no_hue = A.SimCLRAugment(16, mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3), jitter=(0.4, 0.4, 0.4, 0.0))
    torch.testing.assert_close(
        no_hue.apply(x, params), _torchvision_pipeline(x, params, no_hue, hue=False), atol=2e-5, rtol=0
    )


@pytest.mark.parametrize("kernel", [1, 3, 13, 23])
def test_gaussian_blur_equals_torchvision_per_image(kernel):
    x = _images(5, 24, 30, 14)
    sigma = torch.tensor([0.1, 0.5, 1.0, 1.7, 2.0])
    got = A.gaussian_blur(x, sigma, kernel)
    per_image = zip(x, sigma.tolist(), strict=True)
    expected = torch.stack([TF.gaussian_blur(image, [kernel, kernel], [s, s]) for image, s in per_image])
    # two 1-D passes against torchvision's one 2-D pass: float32 sums of up to 23 x 23 terms in another order
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)
    assert (got - x).abs().amax() > 1e-2 or kernel == 1  # it does blur
    torch.testing.assert_close(A.gaussian_kernels(sigma, kernel).sum(1), torch.ones(5))


def test_pipeline_with_blur_equals_torchvision_and_keeps_the_other_draws():
    """lightly's blur defaults equal torchvision; blur's draws come last, so blur off keeps every view."""
    stats = {"mean": (0.4, 0.5, 0.6), "std": (0.2, 0.25, 0.3)}
    aug = A.SimCLRAugment(16, blur_p=0.5, blur_sigma=(0.1, 2.0), **stats)
    assert aug.blur_kernel == 13  # 2 * ceil(3 * 2) + 1
    x = _images(40, 20, 28, 15)
    drawn = aug.sample(len(x), 20, 28, torch.Generator().manual_seed(16))
    assert drawn.blur.any() and not drawn.blur.all()
    torch.testing.assert_close(aug.apply(x, drawn), _torchvision_pipeline(x, drawn, aug), atol=2e-5, rtol=0)
    plain = A.SimCLRAugment(16, **stats)
    without = plain.sample(len(x), 20, 28, torch.Generator().manual_seed(16))
    assert without.blur is None and without.blur_sigma is None
    for name in ("boxes", "flip", "jitter", "factors", "order", "gray"):
        assert torch.equal(getattr(drawn, name), getattr(without, name)), name
    off = A.SimCLRAugment(16, blur_p=0.0, **stats)
    torch.testing.assert_close(
        off(x, torch.Generator().manual_seed(3)), plain(x, torch.Generator().manual_seed(3)), atol=0, rtol=0
    )


def test_draws_follow_the_configured_probabilities_and_ranges():
    blur = {"blur_p": 0.5, "blur_sigma": (0.1, 2.0)}
    aug = A.SimCLRAugment(32, mean=(0.5,) * 3, std=(0.25,) * 3, jitter=(0.4, 0.3, 1.5, 0.1), **blur)
    n = 20000
    p = aug.sample(n, 32, 32, torch.Generator().manual_seed(7))
    assert 0.1 <= p.blur_sigma.min().item() < 0.11 and 1.99 < p.blur_sigma.max().item() <= 2.0
    assert abs(p.blur_sigma.mean().item() - 1.05) < 0.02
    rates = (("flip", p.flip, 0.5), ("jitter", p.jitter, 0.8), ("gray", p.gray, 0.2), ("blur", p.blur, 0.5))
    for name, drawn, expected in rates:
        sigma = math.sqrt(expected * (1 - expected) / n)
        assert abs(drawn.float().mean().item() - expected) < 4.5 * sigma, name
    low, high = p.factors.amin(0).tolist(), p.factors.amax(0).tolist()
    for got, bound in zip(low, (0.6, 0.7, 0.0, -0.1), strict=True):
        assert bound <= got < bound + 0.01
    for got, bound in zip(high, (1.4, 1.3, 2.5, 0.1), strict=True):
        assert bound - 0.01 < got <= bound
    assert (p.order.sort(dim=1).values == torch.arange(4)).all()  # permutations
    counts = torch.bincount(p.order[:, 0], minlength=4).float() / n  # each op first a quarter of the time
    assert ((counts - 0.25).abs() < 0.02).all()


def test_pipeline_rates_in_the_output():
    # Only the jitter (no crop, flip or grey): an image changes iff the jitter was applied to it.
    uncropped = dict(mean=(0.0,) * 3, std=(1.0,) * 3, crop_scale=(1, 1), crop_ratio=(1, 1), gray_p=0)
    aug = A.SimCLRAugment(8, **uncropped, flip_p=0)
    x = torch.rand(3000, 3, 8, 8, generator=torch.Generator().manual_seed(8))
    out = aug(x, torch.Generator().manual_seed(9))
    changed = (out - x).abs().flatten(1).amax(1) > 1e-5
    assert abs(changed.float().mean().item() - 0.8) < 4.5 * math.sqrt(0.16 / 3000)
    # Only the flips.
    aug = A.SimCLRAugment(8, **uncropped, jitter_p=0)
    out = aug(x, torch.Generator().manual_seed(10))
    same = (out - x).abs().flatten(1).amax(1) < 1e-5
    mirrored = (out - x.flip(-1)).abs().flatten(1).amax(1) < 1e-5
    assert (same | mirrored).all()
    assert abs(mirrored.float().mean().item() - 0.5) < 4.5 * math.sqrt(0.25 / 3000)


def test_batch_draws_are_per_image_and_replayable():
    aug = A.SimCLRAugment(16, mean=(0.5,) * 3, std=(0.25,) * 3)
    images = (torch.rand(2000, 3, 16, 16, generator=torch.Generator().manual_seed(2)) * 255).to(torch.uint8)
    out = aug(images, torch.Generator().manual_seed(7))
    assert out.shape == (2000, 3, 16, 16) and out.dtype == torch.float32 and torch.isfinite(out).all()
    assert out.is_contiguous()
    torch.testing.assert_close(out, aug(images, torch.Generator().manual_seed(7)), atol=0, rtol=0)
    assert not torch.equal(out, aug(images, torch.Generator().manual_seed(8)))
    generator = torch.Generator().manual_seed(7)
    assert not torch.equal(aug(images, generator), aug(images, generator))  # the state advances
    grey = (out[:, 0] == out[:, 1]).flatten(1).all(1) & (out[:, 1] == out[:, 2]).flatten(1).all(1)
    assert abs(grey.float().mean().item() - 0.2) < 4.5 * math.sqrt(0.16 / 2000)
    assert len({tuple(x.flatten()[:8].tolist()) for x in out[:50]}) == 50  # every image its own draw


def test_uint8_and_float_input_give_the_same_views():
    aug = A.SimCLRAugment(12, mean=(0.5,) * 3, std=(0.25,) * 3)
    images = (torch.rand(64, 3, 10, 14, generator=torch.Generator().manual_seed(11)) * 255).to(torch.uint8)
    from_uint8 = aug(images, torch.Generator().manual_seed(12))
    from_float = aug(images.float() / 255, torch.Generator().manual_seed(12))
    assert from_uint8.shape == (64, 3, 12, 12)
    torch.testing.assert_close(from_uint8, from_float, atol=0, rtol=0)


def test_invalid_settings_are_named():
    stats = {"mean": (0.5,) * 3, "std": (0.25,) * 3}
    for kwargs, message in (
        ({"size": 0}, "size must be"),
        ({"size": 8, "crop_scale": (0.5, 0.1)}, "crop_scale"),
        ({"size": 8, "crop_ratio": (0, 1)}, "crop_ratio"),
        ({"size": 8, "jitter": (0.4, 0.4, 0.4, 0.6)}, "jitter"),
        ({"size": 8, "gray_p": 1.5}, "gray_p"),
        ({"size": 8, "blur_p": 1.5}, "blur_p"),
        ({"size": 8, "blur_sigma": (0.0, 2.0)}, "blur_sigma"),
        ({"size": 8, "blur_kernel": 4}, "blur_kernel must be an odd"),
        ({"size": 6, "blur_p": 0.5}, "blur_kernel 13 needs images larger than 6 pixels"),
    ):
        with pytest.raises(ValueError, match=message):
            A.SimCLRAugment(**kwargs, **stats)
    with pytest.raises(ValueError, match="std"):
        A.SimCLRAugment(8, mean=(0.5,) * 3, std=(0.0, 1.0, 1.0))
    with pytest.raises(ValueError, match=r"\[B, 3, H, W\]"):
        A.SimCLRAugment(8, **stats)(torch.zeros(2, 1, 8, 8), torch.Generator())
