"""Image encoders of the vision track: ResNets from torchvision's blocks, and the projection head.

``build_encoder("resnet18", stem="cifar")`` is MACL App. B.3's CIFAR ResNet-18: torchvision's
ResNet-18 with the 7x7 stride-2 first convolution replaced by a 3x3 stride-1 one and the first max-pool
removed; the classifier is dropped, so the encoder returns the 512-d pooled features (the OAR paper's
"last fc removed"). At ``width=64`` the modules and parameter names are torchvision's (a test loads
torchvision's weights into it); a smaller ``width`` scales every stage (CPU tests and the demo). The
stem is an argument, never inferred from the dataset.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torchvision.models.resnet import BasicBlock, Bottleneck, conv1x1

from contrastlab.families import RESNETS

__all__ = ["ARCHS", "STEMS", "ProjectionHead", "ResNetEncoder", "build_encoder"]

#: Block type and blocks per stage (He et al. 2016, Table 1), of each :data:`contrastlab.families.RESNETS`.
ARCHS = {
    arch: ({"basic": BasicBlock, "bottleneck": Bottleneck}[resnet.block], resnet.layers)
    for arch, resnet in RESNETS.items()
}
STEMS = ("cifar", "imagenet")


class ResNetEncoder(nn.Module):
    """A ResNet without its classifier: images [B, 3, H, W] -> pooled features [B, feature_dim]."""

    def __init__(
        self,
        block: type,
        layers: tuple[int, ...],
        *,
        width: int = 64,
        stem: str = "cifar",
        out_dim: int | None = None,
    ) -> None:
        super().__init__()
        if stem not in STEMS:
            raise ValueError(f"unknown stem {stem!r}; valid: {', '.join(STEMS)}")
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        if stem == "cifar":  # MACL App. B.3: 3x3 stride-1 convolution, no max-pool
            self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        inplanes = width
        for index, blocks in enumerate(layers):
            planes, stride = width * 2**index, 1 if index == 0 else 2
            downsample = None
            if stride != 1 or inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    conv1x1(inplanes, planes * block.expansion, stride),
                    nn.BatchNorm2d(planes * block.expansion),
                )
            stage = [block(inplanes, planes, stride, downsample)]
            inplanes = planes * block.expansion
            stage += [block(inplanes, planes) for _ in range(1, blocks)]
            setattr(self, f"layer{index + 1}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = inplanes
        # OAR §5.2: a ResNet-50 "that outputs 512-d embeddings": a linear map of the pooled features.
        self.out: nn.Module = nn.Identity()
        if out_dim is not None:
            if out_dim < 1:
                raise ValueError(f"out_dim must be >= 1 or None, got {out_dim}")
            self.out = nn.Linear(inplanes, out_dim)
            self.feature_dim = out_dim
        # torchvision's initialisation (kaiming normal, fan_out; BatchNorm weight 1, bias 0).
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.out(torch.flatten(self.avgpool(x), 1))


def build_encoder(
    arch: str = "resnet18", *, stem: str = "cifar", width: int = 64, out_dim: int | None = None
) -> ResNetEncoder:
    """A randomly initialised ResNet encoder (``arch`` in :data:`ARCHS`); ``.feature_dim`` is its output size
    (the pooled features, or ``out_dim`` through a final linear layer).

    >>> build_encoder("resnet18", width=8).feature_dim
    64
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown encoder {arch!r}; valid: {', '.join(ARCHS)}")
    block, layers = ARCHS[arch]
    return ResNetEncoder(block, layers, width=width, stem=stem, out_dim=out_dim)


class ProjectionHead(nn.Module):
    """The 2-layer MLP head before the loss (SimCLR, Chen et al. 2020 §2.1): Linear -> BatchNorm ->
    ReLU -> Linear to ``out_dim`` (128, protocol.md §3). BatchNorm in the hidden layer as SimCLR's
    released code (``projection_head``); the evaluation never uses the head."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden_dim, bias=False),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, out_dim),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)
