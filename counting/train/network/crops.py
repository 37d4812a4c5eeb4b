"""Training crops for the crowd network: the train pictures held in memory, a crop drawn per row.

Every picture is read once and kept at a short side of ``INPUT_SIZE * MAX_SCALE`` pixels (uint8;
about 2 GB for the four shared sets), its head dots scaled with it. A crop is drawn as follows:
- the set, by ``shares`` (the sparse everyday photos keep their place beside the crowds);
- a picture of that set, uniformly;
- a scale: the network sees pictures at a short side of ``INPUT_SIZE`` (what the count uses), times
  a factor drawn log-uniformly from ``scale_range`` (people of other sizes: multi-scale crops);
- a window of ``crop`` x ``crop`` pixels at that scale, anywhere in the picture (a picture smaller
  than the window is padded with grey, which holds no one);
- a mirror image half of the time;
- a degradation (:mod:`counting.train.network.degrade`).

Draws come from ``numpy.random.default_rng([seed, step])``: step ``s`` of a run gets the same crops
whether or not the run was stopped and resumed before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from counting.data.datasets.base import Sample
from counting.data.imaging import load_image
from counting.train.network.degrade import DegradeShares, degrade

__all__ = ["INPUT_SIZE", "MAX_SCALE", "CropBatch", "TrainingPictures", "stored_size"]

INPUT_SIZE = 576  # the short side the count resizes pictures to (the crowd model's input size)
MAX_SCALE = 1.3
_GREY = 127  # the normalisation's zero: padding that reads as nothing


def stored_size(width: int, height: int, short: float) -> tuple[int, int]:
    """``(width, height)`` with the short side made ``short`` pixels, aspect kept."""
    factor = short / min(width, height)
    return max(1, round(width * factor)), max(1, round(height * factor))


@dataclass
class CropBatch:
    """``pixels`` ``(B, crop, crop, 3)`` uint8 RGB; ``points`` each crop's ``(k, 2)`` x, y heads."""

    pixels: np.ndarray
    points: list[np.ndarray]


class TrainingPictures:
    """The train pictures of several sets in memory (module docstring)."""

    def __init__(
        self,
        samples_by_set: dict[str, Sequence[Sample]],
        shares: dict[str, float],
        reader: Callable[[Sample], np.ndarray] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        unknown = sorted(set(shares) - set(samples_by_set))
        if unknown:
            raise ValueError(f"shares name sets with no pictures: {', '.join(unknown)}")
        empty = [name for name, samples in samples_by_set.items() if len(samples) == 0 and shares.get(name, 0) > 0]
        if empty:
            raise ValueError(f"no train pictures in {', '.join(empty)}")
        self.names = [name for name in samples_by_set if shares.get(name, 0.0) > 0]
        total = sum(shares[name] for name in self.names)
        self.shares = np.array([shares[name] / total for name in self.names])
        read = reader or _read_stored
        self.pixels: dict[str, list[np.ndarray]] = {}
        self.dots: dict[str, list[np.ndarray]] = {}
        for name in self.names:
            self.pixels[name], self.dots[name] = [], []
            for sample in samples_by_set[name]:
                pixels, dots = read(sample)
                self.pixels[name].append(pixels)
                self.dots[name].append(dots)
                if progress is not None:
                    progress(1)

    def __len__(self) -> int:
        return sum(len(items) for items in self.pixels.values())

    def draw(
        self,
        rng: np.random.Generator,
        batch: int,
        crop: int,
        scale_range: tuple[float, float],
        shares: DegradeShares,
    ) -> CropBatch:
        pixels = np.empty((batch, crop, crop, 3), dtype=np.uint8)
        points = []
        sets = rng.choice(len(self.names), size=batch, p=self.shares)
        for row, chosen in enumerate(sets):
            name = self.names[int(chosen)]
            index = int(rng.integers(len(self.pixels[name])))
            scale = float(np.exp(rng.uniform(np.log(scale_range[0]), np.log(scale_range[1]))))
            window, heads = _crop(self.pixels[name][index], self.dots[name][index], crop, scale / MAX_SCALE, rng)
            if rng.random() < 0.5:
                window = window[:, ::-1]
                heads = np.column_stack([crop - heads[:, 0], heads[:, 1]]) if len(heads) else heads
            pixels[row] = degrade(np.ascontiguousarray(window), rng, shares)
            points.append(heads.astype(np.float32))
        return CropBatch(pixels, points)


def _read_stored(sample: Sample) -> tuple[np.ndarray, np.ndarray]:
    """A picture at the stored short side, and its head dots in those pixels."""
    image = load_image(sample.path).convert("RGB")
    width, height = image.size
    size = stored_size(width, height, INPUT_SIZE * MAX_SCALE)
    factor = np.array([size[0] / width, size[1] / height])
    image = image.resize(size, Image.Resampling.BILINEAR)
    dots = np.zeros((0, 2)) if sample.dots is None else np.asarray(sample.dots, dtype=float).reshape(-1, 2) * factor
    return np.asarray(image, dtype=np.uint8), dots


def _crop(
    pixels: np.ndarray, dots: np.ndarray, crop: int, factor: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A ``crop`` x ``crop`` window of ``pixels`` resized by ``factor``: the source window of
    ``crop / factor`` pixels is cut first, so that only the window is resized."""
    height, width = pixels.shape[:2]
    side = max(1, round(crop / factor))
    left = int(rng.integers(0, max(1, width - side + 1)))
    top = int(rng.integers(0, max(1, height - side + 1)))
    source = np.full((side, side, 3), _GREY, dtype=np.uint8)
    part = pixels[top : top + side, left : left + side]
    source[: part.shape[0], : part.shape[1]] = part
    window = np.asarray(Image.fromarray(source).resize((crop, crop), Image.Resampling.BILINEAR))
    if len(dots) == 0:
        return window, np.zeros((0, 2))
    inside = (dots[:, 0] >= left) & (dots[:, 0] < left + side) & (dots[:, 1] >= top) & (dots[:, 1] < top + side)
    heads = (dots[inside] - [left, top]) * (crop / side)
    return window, heads
