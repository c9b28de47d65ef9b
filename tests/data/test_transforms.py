"""The evaluation transform of images (contrastlab.data.transforms) against torchvision's."""

from __future__ import annotations

import torch
from torchvision.transforms.v2 import functional as TF

from contrastlab.data.transforms import eval_transform


def test_eval_transform_normalises_and_resizes():
    images = torch.full((2, 3, 8, 8), 255, dtype=torch.uint8)
    out = eval_transform(images, size=16, mean=(0.5,) * 3, std=(0.5,) * 3)
    assert out.shape == (2, 3, 16, 16) and out.dtype == torch.float32
    assert torch.allclose(out, torch.ones_like(out))
    x = torch.rand(2, 3, 20, 20, generator=torch.Generator().manual_seed(13))
    expected = TF.normalize(TF.resize(x, [10, 10]), [0.4, 0.5, 0.6], [0.2, 0.25, 0.3])  # antialiased
    got = eval_transform(x, size=10, mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
