"""Image encoders (MACL App. B.3's CIFAR ResNet-18; ResNet-50) and the projection head."""

from __future__ import annotations

import pytest
import torch
from torchvision.models import resnet18, resnet50

from contrastlab.models.vision import ProjectionHead, build_encoder


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_cifar_resnet18_is_torchvisions_with_the_cifar_stem():
    ours, theirs = build_encoder("resnet18", stem="cifar"), resnet18()
    fc = theirs.fc.weight.numel() + theirs.fc.bias.numel()
    assert n_params(ours) == n_params(theirs) - fc - 64 * 3 * 7 * 7 + 64 * 3 * 3 * 3
    weights = {k: v for k, v in theirs.state_dict().items() if not k.startswith(("fc.", "conv1."))}
    missing, unexpected = ours.load_state_dict(weights, strict=False)
    assert missing == ["conv1.weight"] and unexpected == []
    assert ours.conv1.kernel_size == (3, 3) and ours.conv1.stride == (1, 1)
    assert isinstance(ours.maxpool, torch.nn.Identity)
    assert ours.feature_dim == 512 and ours(torch.zeros(2, 3, 32, 32)).shape == (2, 512)


def test_imagenet_stem_is_torchvisions_exactly():
    for arch, reference, dim in [("resnet18", resnet18, 512), ("resnet50", resnet50, 2048)]:
        ours, theirs = build_encoder(arch, stem="imagenet", width=64), reference()
        weights = {k: v for k, v in theirs.state_dict().items() if not k.startswith("fc.")}
        ours.load_state_dict(weights, strict=True)
        assert ours.feature_dim == dim and isinstance(ours.maxpool, torch.nn.MaxPool2d)
        theirs.fc = torch.nn.Identity()
        x = torch.randn(2, 3, 64, 64)
        assert torch.equal(ours.eval()(x), theirs.eval()(x))  # same modules, same computation


def test_cifar_stem_keeps_the_resolution_the_imagenet_stem_quarters():
    maps = {}
    for stem in ("cifar", "imagenet"):
        encoder = build_encoder("resnet18", stem=stem, width=8)
        maps[stem] = encoder.layer1(
            encoder.maxpool(encoder.relu(encoder.bn1(encoder.conv1(torch.zeros(1, 3, 32, 32)))))
        )
    assert maps["cifar"].shape == (1, 8, 32, 32) and maps["imagenet"].shape == (1, 8, 8, 8)


@pytest.mark.parametrize(
    ("arch", "width", "dim"), [("resnet18", 8, 64), ("resnet18", 16, 128), ("resnet50", 8, 256)]
)
def test_width_scales_every_stage(arch, width, dim):
    encoder = build_encoder(arch, width=width)
    expansion = 4 if arch == "resnet50" else 1
    for index in range(4):
        stage = getattr(encoder, f"layer{index + 1}")
        assert stage[-1].conv1.in_channels == width * 2**index * expansion
    assert encoder.feature_dim == dim and encoder(torch.zeros(3, 3, 16, 16)).shape == (3, dim)
    assert n_params(encoder) < n_params(build_encoder(arch, width=64)) / 10


def test_the_head_and_invalid_arguments():
    head = ProjectionHead(64, 32, 16)
    assert head(torch.randn(3, 64)).shape == (3, 16)
    assert [type(m).__name__ for m in head.net] == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
    with pytest.raises(ValueError, match="unknown encoder 'resnet34'; valid: resnet18, resnet50"):
        build_encoder("resnet34")
    with pytest.raises(ValueError, match="unknown stem 'tiny'; valid: cifar, imagenet"):
        build_encoder("resnet18", stem="tiny")
    with pytest.raises(ValueError, match="width must be >= 1"):
        build_encoder("resnet18", width=0)
