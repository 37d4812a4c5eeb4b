"""The crowd network: EfficientNet-Lite0's lower blocks (frozen), its upper blocks (trained) and a
density decoder, one torch module.

    pixels (x-127)/128 -> stem, blocks 0..FROZEN_BELOW-1 (frozen: ImageNet weights, no gradient)
        -> blocks FROZEN_BELOW..LAST_BLOCK (trained) -> decoder -> people per stride-8 cell

The decoder reads what the frozen heads read (docs/density.md: block4 at stride 8, block7 and
block10 at stride 16 brought up bilinearly) through a 1x1 convolution, ``depth`` 3x3 convolutions
and a 1x1 convolution to one channel, its absolute value last (:class:`Absolute`).

Why the lower blocks stay frozen: they run at strides 2-8 and hold most of the trunk's
activations, so back-propagating through them would cost most of a training step on two cores,
while their ImageNet filters (edges, textures) are what every later layer reads anyway. Blocks 5-10
(0.82 M of the trunk's 1.4 M parameters through block 10) are where a crowd differs from an
ImageNet object, and they are trained. Their batch norms keep their ImageNet statistics (eval
mode): the batches here hold a few crops, too few for batch statistics.

The module's trained arrays leave it as plain NumPy arrays under their torch names
(:meth:`CrowdNetwork.trained_arrays`), so a file holds them without pickle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from counting.features.backbones.efficientnet import EFFICIENTNET_LITE0_NORMALISATION, packaged_weights_path
from counting.features.backbones.weights import load_checkpoint

__all__ = [
    "LOWER_TAP",
    "ChannelStandardise",
    "DECODER_TAPS",
    "FROZEN_BELOW",
    "LAST_BLOCK",
    "NETWORK_STRIDE",
    "CrowdNetwork",
    "normalise",
]

FROZEN_BELOW = 5  # blocks 0-4 (strides 2-8) keep their ImageNet weights
LAST_BLOCK = 10  # the deepest block read: block 11 would halve the resolution to stride 32
DECODER_TAPS = (4, 7, 10)  # the blocks whose outputs the decoder reads
NETWORK_STRIDE = 8
LOWER_TAP = f"block{FROZEN_BELOW - 1}"  # the backbone tap the trained part reads
# The last convolution gives people per cell times this: its outputs are of the order of one where
# a cell's density is of the order of 0.1, so Adam's steps move the weights and the bias alike.
OUTPUT_SCALE = 10.0


def normalise(pixels: torch.Tensor) -> torch.Tensor:
    """``(n, 3, H, W)`` RGB pixels 0-255 (float) -> the network's input, as Lite0 was trained."""
    mean = EFFICIENTNET_LITE0_NORMALISATION.mean[0]
    std = EFFICIENTNET_LITE0_NORMALISATION.std[0]
    return (pixels - mean) / std


class ChannelStandardise(nn.Module):
    """``(x - mean) / scale`` per channel, set once from training crops (:meth:`CrowdNetwork.calibrate`).

    The blocks' outputs range over tens; fed raw to the decoder, Adam's first steps moved its
    1x1 convolution's outputs by as much and left every ReLU dead within 20 steps (the density
    collapsed to zero on ShanghaiTech B crops). The conv heads standardise their maps the same way.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(1, channels, 1, 1))
        self.register_buffer("scale", torch.ones(1, channels, 1, 1))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return (inputs - self.mean) / self.scale


class Absolute(nn.Module):
    """The density is the absolute value of the last convolution over ``scale``, as in the Bayesian
    loss's own code: >= 0, and its gradient never vanishes, where a ReLU's dies on a cell pushed
    below zero and a softplus's fades."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs.abs() / self.scale


class CrowdNetwork(nn.Module):
    """Lite0 through block 10 and a density decoder (see the module docstring).

    ``forward`` takes normalised ``(n, 3, H, W)`` pictures and gives ``(n, H/8, W/8)`` people per
    cell (H, W rounded up to a multiple of 8 by "same" padding).
    """

    def __init__(self, width: int = 64, depth: int = 3, pretrained: bool = True) -> None:
        super().__init__()
        from efficientnet_lite_pytorch import EfficientNet

        lite0 = EfficientNet.from_name("efficientnet-lite0", image_size=None)
        if pretrained:
            load_checkpoint(packaged_weights_path(), lite0, "efficientnet-lite0")
        self.stem = nn.Sequential(lite0._conv_stem, lite0._bn0, nn.ReLU6())
        self.lower = nn.ModuleList(lite0._blocks[:FROZEN_BELOW])
        self.upper = nn.ModuleList(lite0._blocks[FROZEN_BELOW : LAST_BLOCK + 1])
        for parameter in [*self.stem.parameters(), *self.lower.parameters()]:
            parameter.requires_grad_(False)
        channels = sum(int(lite0._blocks[index]._block_args.output_filters) for index in DECODER_TAPS)
        layers: list[nn.Module] = [ChannelStandardise(channels), nn.Conv2d(channels, width, 1), nn.ReLU(inplace=True)]
        for _ in range(depth):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.ReLU(inplace=True)]
        layers += [nn.Conv2d(width, 1, 1), Absolute(OUTPUT_SCALE)]
        self.decoder = nn.Sequential(*layers)
        self.width = width
        self.depth = depth
        # From the start, not only once train() is called: a batch norm in training mode moves its
        # running statistics on every pass, no_grad or not, and the calibration's pass would have
        # moved the frozen blocks' away from the backbone's (0.9 off on block 4's map).
        self.train()

    def train(self, mode: bool = True) -> CrowdNetwork:
        """Training mode for the decoder only: every batch norm keeps its ImageNet statistics."""
        super().train(mode)
        self.stem.eval()
        self.lower.eval()
        self.upper.eval()
        return self

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.features(inputs))[:, 0]

    @torch.no_grad()
    def calibrate(self, inputs: torch.Tensor) -> None:
        """Set the decoder's channel standardisation from normalised training crops ``inputs``."""
        features = self.features(inputs)
        standardise = self.decoder[0]
        standardise.mean.copy_(features.mean(dim=(0, 2, 3), keepdim=True))
        standardise.scale.copy_(features.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-3))

    def features(self, inputs: torch.Tensor) -> torch.Tensor:
        """What the decoder reads: the taps on the stride-8 grid, concatenated."""
        with torch.no_grad():
            x = self.stem(inputs)
            for block in self.lower:
                x = block(x)
        return self.upper_features(x)

    def from_lower(self, lower: torch.Tensor) -> torch.Tensor:
        """The density from the frozen part's output (block 4's map, which the backbone the count
        runs gives as its ``block4`` tap): ``(n, 40, h, w)`` -> ``(n, h, w)``."""
        return self.decoder(self.upper_features(lower))[:, 0]

    def upper_features(self, lower: torch.Tensor) -> torch.Tensor:
        x = lower
        taps = {FROZEN_BELOW - 1: x}
        for offset, block in enumerate(self.upper):
            x = block(x)
            taps[FROZEN_BELOW + offset] = x
        fine = taps[DECODER_TAPS[0]]
        size = fine.shape[-2:]
        coarse = [
            F.interpolate(taps[index], size=size, mode="bilinear", align_corners=False) for index in DECODER_TAPS[1:]
        ]
        return torch.cat([fine, *coarse], dim=1)

    def trained_arrays(self) -> dict[str, torch.Tensor]:
        """The trained part's parameters and buffers by name (the frozen part is the packaged file's)."""
        state = self.state_dict()
        return {name: value for name, value in state.items() if name.startswith(("upper.", "decoder."))}

    def load_trained_arrays(self, arrays: dict[str, torch.Tensor]) -> None:
        """Put arrays of :meth:`trained_arrays` back (missing or extra names are an error)."""
        own = self.trained_arrays()
        missing = sorted(set(own) - set(arrays))
        extra = sorted(set(arrays) - set(own))
        if missing or extra:
            raise ValueError(f"network arrays do not match: missing {missing[:3]}, unexpected {extra[:3]}")
        for name, value in arrays.items():
            if tuple(value.shape) != tuple(own[name].shape):
                raise ValueError(f"network array {name}: shape {tuple(value.shape)}, expected {tuple(own[name].shape)}")
        self.load_state_dict({**self.state_dict(), **arrays})
