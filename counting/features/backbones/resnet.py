"""ResNet-50 (the paper's backbone) with torchvision's exact state-dict layout.

Written out here because torchvision does not import with the CPU torch build this project
pins; keeping torchvision's module names (conv1, bn1, layer1..4 of Bottleneck blocks with
downsample.0/.1, fc) means torchvision's own checkpoint files load unchanged.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from counting.features.backbones.base import Backbone
from counting.features.backbones.preprocessing import Normalisation
from counting.features.backbones.weights import file_sha256, load_checkpoint, resolve_resnet50_weights

__all__ = ["IMAGENET_NORMALISATION", "ResNet50", "build_resnet50"]

IMAGENET_NORMALISATION = Normalisation(
    mean=(0.485 * 255, 0.456 * 255, 0.406 * 255), std=(0.229 * 255, 0.224 * 255, 0.225 * 255)
)


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (V1.5: the stride sits on the 3x3 convolution)."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 with torchvision's attribute names; ``features`` is the trunk."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self._in_channels = 64
        self.layer1 = self._make_layer(64, blocks=3, stride=1)
        self.layer2 = self._make_layer(128, blocks=4, stride=2)
        self.layer3 = self._make_layer(256, blocks=6, stride=2)
        self.layer4 = self._make_layer(512, blocks=3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)

    def _make_layer(self, width: int, blocks: int, stride: int) -> nn.Sequential:
        out_channels = width * Bottleneck.expansion
        downsample = None
        if stride != 1 or self._in_channels != out_channels:
            downsample = nn.Sequential(
                nn.Conv2d(self._in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        layers = [Bottleneck(self._in_channels, width, stride, downsample)]
        self._in_channels = out_channels
        layers += [Bottleneck(out_channels, width) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The final feature map (B, 2048, H/32, W/32)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


class _Trunk(nn.Module):
    def __init__(self, network: ResNet50) -> None:
        super().__init__()
        self.network = network

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.network.features(inputs)


def build_resnet50(weights: str | os.PathLike[str] | None = None, *, allow_download: bool = True) -> Backbone:
    """ResNet-50 backbone; weights from ``weights``, torch's hub cache, or torchvision's URL."""
    path = resolve_resnet50_weights(weights, allow_download=allow_download)
    network = ResNet50()
    load_checkpoint(path, network, "resnet50")
    network.eval()
    return Backbone(
        name="resnet50",
        trunk=_Trunk(network),
        head=network.fc,
        normalisation=IMAGENET_NORMALISATION,
        weights_sha256=file_sha256(path),
        weights_path=path,
        taps={f"layer{index}": f"network.layer{index}" for index in range(1, 5)},
    )
