"""SimCLR augmentations on batches: each operation equals torchvision's on single images; per-image
draws; deterministic given the generator."""

from __future__ import annotations

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from contrastlab.training import augment as A

IMAGES = torch.rand(6, 3, 20, 20, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("ours", "theirs", "factor"),
    [
        (A.adjust_brightness, TF.adjust_brightness, 1.35),
        (A.adjust_contrast, TF.adjust_contrast, 0.65),
        (A.adjust_saturation, TF.adjust_saturation, 1.3),
        (A.adjust_hue, TF.adjust_hue, 0.09),
        (A.adjust_hue, TF.adjust_hue, -0.1),
    ],
)
def test_colour_operations_equal_torchvision_per_image(ours, theirs, factor):
    got = ours(IMAGES, torch.full((len(IMAGES),), factor))
    expected = torch.stack([theirs(image, factor) for image in IMAGES])
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)


def test_per_image_factors_are_applied_to_their_own_image():
    factors = torch.linspace(0.6, 1.4, len(IMAGES))
    got = A.adjust_contrast(IMAGES, factors)
    for image, factor, out in zip(IMAGES, factors.tolist(), got, strict=True):
        torch.testing.assert_close(out, TF.adjust_contrast(image, factor), atol=2e-6, rtol=0)


def test_grayscale_equals_torchvision():
    torch.testing.assert_close(A.grayscale(IMAGES), TF.rgb_to_grayscale(IMAGES), atol=1e-6, rtol=0)


def test_crop_equals_torchvision_resized_crop_inside_the_box():
    boxes = torch.tensor([[3.0, 5.0, 12.0, 10.0]]).expand(len(IMAGES), 4)
    got = A._crop_and_flip(IMAGES, boxes, torch.zeros(len(IMAGES), dtype=torch.bool), 16)
    expected = TF.resized_crop(IMAGES, 3, 5, 12, 10, [16, 16], antialias=False)
    # Identical except the outermost half pixel when enlarging: torchvision clamps to the box's edge
    # pixels, grid_sample blends in the neighbours just outside the box.
    torch.testing.assert_close(got[..., 1:-1, 1:-1], expected[..., 1:-1, 1:-1], atol=1e-5, rtol=0)
    flipped = A._crop_and_flip(IMAGES, boxes, torch.ones(len(IMAGES), dtype=torch.bool), 16)
    torch.testing.assert_close(flipped, TF.horizontal_flip(got), atol=1e-5, rtol=0)
    smaller = A._crop_and_flip(IMAGES, boxes, torch.zeros(len(IMAGES), dtype=torch.bool), 6)
    torch.testing.assert_close(
        smaller, TF.resized_crop(IMAGES, 3, 5, 12, 10, [6, 6], antialias=False), atol=1e-5, rtol=0
    )


def test_crop_boxes_follow_random_resized_crop():
    boxes = A.sample_crop_boxes(
        20000,
        32,
        32,
        scale=(0.08, 1.0),
        ratio=(3 / 4, 4 / 3),
        generator=torch.Generator().manual_seed(1),
        device="cpu",
    )
    top, left, h, w = boxes.unbind(1)
    area = h * w / 1024
    assert (
        (top >= 0).all()
        and (left >= 0).all()
        and (top + h <= 32 + 1e-4).all()
        and (left + w <= 32 + 1e-4).all()
    )
    assert area.min() >= 0.08 - 1e-6 and area.max() <= 1 + 1e-6
    ratio = w / h
    assert ratio.min() >= 3 / 4 - 1e-5 and ratio.max() <= 4 / 3 + 1e-5
    assert 0.45 < area.mean() < 0.6  # uniform in [0.08, 1] with large boxes rejected more often


def test_batch_draws_are_per_image_and_replayable():
    aug = A.SimCLRAugment(16, mean=(0.5,) * 3, std=(0.25,) * 3)
    images = (torch.rand(4000, 3, 16, 16, generator=torch.Generator().manual_seed(2)) * 255).to(torch.uint8)
    out = aug(images, torch.Generator().manual_seed(7))
    assert out.shape == (4000, 3, 16, 16) and out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out, aug(images, torch.Generator().manual_seed(7)), atol=0, rtol=0)
    assert not torch.equal(out, aug(images, torch.Generator().manual_seed(8)))
    grey = (out[:, 0] == out[:, 1]).flatten(1).all(1) & (out[:, 1] == out[:, 2]).flatten(1).all(1)
    assert 0.17 < grey.float().mean() < 0.23  # p 0.2 (colour images are never grey otherwise)
    assert len({tuple(x.flatten()[:8].tolist()) for x in out[:50]}) == 50  # every image its own draw


def test_flip_probability_and_identity_settings():
    # No crop (scale 1, ratio 1), no jitter, no grey: only the flips remain.
    aug = A.SimCLRAugment(
        8, mean=(0.0,) * 3, std=(1.0,) * 3, crop_scale=(1, 1), crop_ratio=(1, 1), jitter_p=0, gray_p=0
    )
    images = torch.rand(2000, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    out = aug(images, torch.Generator().manual_seed(4))
    same = (out - images).abs().flatten(1).amax(1) < 1e-5
    mirrored = (out - images.flip(-1)).abs().flatten(1).amax(1) < 1e-5
    assert (same | mirrored).all()
    assert 0.46 < mirrored.float().mean() < 0.54


def test_eval_transform_normalises_and_resizes():
    images = torch.full((2, 3, 8, 8), 255, dtype=torch.uint8)
    out = A.eval_transform(images, size=16, mean=(0.5,) * 3, std=(0.5,) * 3)
    assert out.shape == (2, 3, 16, 16) and torch.allclose(out, torch.ones_like(out))
