"""Counting whole pictures with a crowd network, and its figures on the validation parts.

A picture is counted as the count counts it: resized so its short side is ``INPUT_SIZE`` (aspect
kept) and normalised by the count's own preprocessing, run whole, and its density summed. The
network runs its frozen part on torch here, where the count runs it as its backbone's block-4 tap
(ONNX Runtime by default): the maps agree to 1e-4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from PIL import Image

from counting.data.datasets.base import Sample
from counting.data.datasets.crowd import CrowdDataset
from counting.data.imaging import load_image
from counting.features.backbones.efficientnet import EFFICIENTNET_LITE0_NORMALISATION
from counting.features.backbones.preprocessing import Preprocessing, prepare_image
from counting.heads.density.network.module import CrowdNetwork
from counting.train.network.crops import INPUT_SIZE

__all__ = ["MISLABELLED", "count_pictures", "crowd_parts", "network_input", "validation_figures"]

# coco-voc20's photo whose label is wrong (13 people boxed, about 39 visible): left out of training
# and validation alike (../shared/data/README.md, errata).
MISLABELLED = frozenset({"000000002299"})


def crowd_parts(crowd: CrowdDataset) -> tuple[dict[str, list[Sample]], dict[str, list[Sample]]]:
    """``(train, validation)``: each crowd set's train pictures and its fixed validation part (the
    ``test`` split), by set name in the dataset's order, :data:`MISLABELLED` in neither."""
    train: dict[str, list[Sample]] = {}
    validation: dict[str, list[Sample]] = {}
    for sample in crowd.samples:
        if sample.path.stem in MISLABELLED:
            continue
        part = validation if sample.split == "test" else train if sample.split == "train" else None
        if part is not None:
            part.setdefault(crowd.sources[str(sample.path)], []).append(sample)
    return train, validation


def network_input(image: Image.Image, input_size: int = INPUT_SIZE) -> torch.Tensor:
    """An RGB picture -> the network's ``(1, 3, H, W)`` input at a short side of ``input_size``,
    resized and normalised by the count's own code (what the count will feed it)."""
    tensor = prepare_image(image, Preprocessing(input_size=input_size), EFFICIENTNET_LITE0_NORMALISATION, warn=False)
    return tensor[None].contiguous(memory_format=torch.channels_last)


def count_pictures(
    network: CrowdNetwork,
    samples: Sequence[Sample],
    device: torch.device | str = "cpu",
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``(n,)`` the network's count of each sample's picture."""
    network.eval()
    counts = np.empty(len(samples))
    with torch.inference_mode():
        for row, sample in enumerate(samples):
            inputs = network_input(load_image(sample.path)).to(device)
            counts[row] = float(network(inputs).sum())
            if progress is not None:
                progress(1)
    return counts


def validation_figures(
    network: CrowdNetwork,
    parts: dict[str, Sequence[Sample]],
    device: torch.device | str = "cpu",
    progress: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """``{"<set> MAE": ..., "<set> bias": ...}`` over each validation part (bias: mean count minus truth)."""
    figures: dict[str, float] = {}
    for name, samples in parts.items():
        counts = count_pictures(network, samples, device, progress)
        truth = np.array([float(sample.count) for sample in samples])
        figures[f"{name} MAE"] = float(np.mean(np.abs(counts - truth)))
        figures[f"{name} bias"] = float(np.mean(counts - truth))
    return figures
