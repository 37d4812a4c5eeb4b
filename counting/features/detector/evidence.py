"""The detector's person evidence for a crowd model, from the crowd model's own network inputs.

A crowd density model counts textures as crowds on sparse everyday photos, where the detector
counts people well (issue 21: on the coco-voc20 validation photos the detector's count at score
0.2 has RMSE 1.4, the density head's sum 23). The sparse gate (:mod:`counting.heads.crowd.sparse_gate`)
reads both. So that every path through a model sees the same evidence (photos from files, video
frames, arrays, served uploads), it is computed from the *prepared* backbone input every path
already makes: the normalised tensor is turned back into pixels and stretched to the detector's
512x512 input. One route, not a second decode of the original file.

**Wide and tall pictures are cut into tiles.** Stretched whole to a square, a picture wider than
about 2:1 squeezes its people thin: a row of coco-voc20 photos side by side, 3:1, was counted 12
people where each photo alone gives 11, and at 5:1 1. A picture whose long side is more than
``TILE_ASPECT`` times its short side is cut along the long side into the fewest tiles of at most
that aspect, each reaching ``TILE_MARGIN`` short sides beyond its *core* (its share of the long
side) so that a person standing on a core's edge is seen whole by one tile. Each tile goes to the
detector alone; a detection counts where its centre lies in the tile's core (every place of the
picture lies in exactly one core, so no person is counted by two tiles), and the heat mass is
summed over the cores. The picture's quantities are the tiles' sums; its boxes are in the
picture's fractions as before. Pictures within the aspect give exactly the rows they gave
before (one tile, nothing dropped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from counting.features.detector.decode import COCO_TO_VOC, Detections
from counting.features.detector.descriptor import N_CLASSES, QUANTITIES, THRESHOLDS, detection_descriptors
from counting.features.detector.runner import INPUT_SIZE, resize_planes_tf_bilinear

__all__ = [
    "PERSON_QUANTITIES",
    "TILE_ASPECT",
    "TILE_MARGIN",
    "core_cells",
    "detector_tiles",
    "map_tiles",
    "person_boxes",
    "person_evidence",
]

# What each person row holds (square roots, as the detector descriptor stores them).
PERSON_QUANTITIES: tuple[str, ...] = QUANTITIES
# Pictures (tiles) per detector pass (its 512x512 inputs are 3 MB each).
DETECTOR_BATCH = 8
# Longest long side / short side the detector sees stretched to its square input (see the
# module's docstring): COCO's photos, which it learnt on stretched so, are 4:3 to 2:1.
TILE_ASPECT = 2.0
# How far a tile reaches beyond its core on each side, in short sides (a standing person is
# about half as wide as a picture of a group is high).
TILE_MARGIN = 0.25
# The class a detection outside its tile's core is given: one of the COCO classes the descriptor
# drops (none of the 20 VOC classes), so that it is counted nowhere.
_NOT_COUNTED = int(np.setdiff1d(np.arange(80), COCO_TO_VOC)[0])


@dataclass(frozen=True)
class Tile:
    """One detector input of a picture: ``[start, stop)`` along the long side (rows when
    ``along_rows``, else columns; ``length`` pixels) of the prepared input, counting detections
    whose centre lies in ``[core_start, core_stop)``."""

    start: int
    stop: int
    core_start: int
    core_stop: int
    along_rows: bool
    length: int

    @property
    def is_whole(self) -> bool:
        return self.start == 0 and self.stop == self.length

    def planes(self, tensor: np.ndarray) -> np.ndarray:
        """The tile's part of a ``(C, H, W)`` input."""
        return tensor[:, self.start : self.stop] if self.along_rows else tensor[:, :, self.start : self.stop]

    def core_positions(self, positions: np.ndarray) -> np.ndarray:
        """Whether positions along the long side, in fractions of the tile, lie in its core."""
        where = self.start + np.asarray(positions, np.float64) * (self.stop - self.start)
        return (where >= self.core_start) & (where < self.core_stop)


def detector_tiles(height: int, width: int, max_aspect: float | None = None, margin: float | None = None) -> list[Tile]:
    """The tiles of a ``height`` x ``width`` input: one (the whole) within ``max_aspect``, else the
    fewest whose cores split the long side evenly and whose tiles, cores plus ``margin`` short
    sides on each side, are at most ``max_aspect`` long. None: ``TILE_ASPECT``, ``TILE_MARGIN``
    (read when called, so that a benchmark can set them)."""
    max_aspect = TILE_ASPECT if max_aspect is None else max_aspect
    margin = TILE_MARGIN if margin is None else margin
    along_rows = height > width
    long, short = (height, width) if along_rows else (width, height)
    if long <= max_aspect * short:
        return [Tile(0, long, 0, long, along_rows, long)]
    reach = int(round(margin * short))
    count = math.ceil(long / max(short, max_aspect * short - 2 * reach))
    edges = np.linspace(0, long, count + 1).round().astype(int)
    return [
        Tile(max(0, int(low) - reach), min(long, int(high) + reach), int(low), int(high), along_rows, long)
        for low, high in zip(edges[:-1], edges[1:], strict=True)
    ]


def map_tiles(grid: Sequence[int], stride: int) -> list[Tile]:
    """The tiles of the input behind a density map of ``grid`` ``(h, w)`` cells of ``stride``
    pixels (its size taken as the grid's times the stride: for an input whose short side is a
    multiple of the stride, as the crowd model's 576 is, the tiles of the input itself)."""
    return detector_tiles(int(grid[0]) * stride, int(grid[1]) * stride)


def core_cells(cells: int, tiles: Sequence[Tile]) -> np.ndarray:
    """``(tiles, cells)``: which of a map's ``cells`` along the picture's long side lie in each
    tile's core (the core holding the cell's centre; the cores partition the long side, so every
    cell lies in exactly one)."""
    places = (np.arange(cells) + 0.5) / cells * tiles[0].length
    cores = np.array([[tile.core_start, tile.core_stop] for tile in tiles], dtype=np.float64)
    return (places[None, :] >= cores[:, :1]) & (places[None, :] < cores[:, 1:])


def _detector_input(tensor: Any, normalisation: Any) -> np.ndarray:
    """``(3, 512, 512)`` detector input (0-255) of one prepared backbone input. Resized first and
    turned back into pixels after: both steps are linear, so the order changes the result only by
    float rounding (< 1e-4 grey levels), and the second step then touches 512x512 values, not the
    input's 576x768 (a third of the time)."""
    resized = resize_planes_tf_bilinear(np.asarray(tensor, dtype=np.float32), INPUT_SIZE)
    mean = np.asarray(normalisation.mean, np.float32)[:, None, None]
    std = np.asarray(normalisation.std, np.float32)[:, None, None]
    return np.clip(resized * std + mean, 0.0, 255.0)


def person_evidence(
    tensors: Sequence[Any], normalisation: Any, detector: Any = None, with_boxes: bool = False, with_tiles: bool = False
) -> Any:
    """``(n, len(PERSON_QUANTITIES))`` person rows of the detector descriptor for prepared inputs;
    with ``with_boxes``, ``(rows, boxes)``: each picture's person boxes of :func:`person_boxes`;
    with ``with_tiles`` as well, ``(rows, boxes, tiled)``: per picture its tiles and their own
    ``(tiles, len(PERSON_QUANTITIES))`` rows (one tile, its row, for a picture within the aspect),
    which the sparse gate reads tile by tile (:mod:`counting.heads.crowd.sparse_gate`, "Wide pictures").

    ``normalisation``: the backbone's (``backbone.normalisation``) that made ``tensors``;
    ``detector``: a :class:`~counting.features.detector.runner.CenterNet` (default: the shared one).
    A picture beyond ``TILE_ASPECT`` is seen in tiles (:func:`detector_tiles`, the module's docstring).
    """
    from counting.features.detector import PERSON, detector_backbone

    net = detector if detector is not None else detector_backbone().detector
    planes = [np.asarray(tensor) for tensor in tensors]
    tiles = [(index, tile) for index, plane in enumerate(planes) for tile in detector_tiles(*plane.shape[-2:])]
    whole = np.bincount([index for index, _ in tiles], minlength=len(planes)) == 1
    rows = np.zeros((len(planes), len(PERSON_QUANTITIES)), np.float32)
    # The tiled pictures' quantities, summed over their tiles (the rows hold square roots).
    sums = np.zeros(rows.shape, np.float64)
    pieces: list[list[np.ndarray]] = [[] for _ in planes]
    own: list[list[np.ndarray]] = [[] for _ in planes]  # each tile's own row, in order
    for start in range(0, len(tiles), DETECTOR_BATCH):
        part = tiles[start : start + DETECTOR_BATCH]
        batch = [_detector_input(tile.planes(planes[index]), normalisation) for index, tile in part]
        found, heat = net.detect(batch)
        if not all(whole[index] for index, _ in part):
            found, heat = _in_cores(found, heat, [tile for _, tile in part])
        described = detection_descriptors(found, heat).reshape(len(part), len(QUANTITIES), N_CLASSES)
        for position, (index, tile) in enumerate(part):
            if whole[index]:
                rows[index] = described[position, :, PERSON]
            else:
                sums[index] += np.square(described[position, :, PERSON].astype(np.float64))
            if with_boxes or with_tiles:
                pieces[index].append(person_boxes(found, position, tile))
            own[index].append(described[position, :, PERSON].astype(np.float64))
    rows[~whole] = np.sqrt(sums[~whole])
    if not (with_boxes or with_tiles):
        return rows
    boxes = [tiled[0] if len(tiled) == 1 else _best_first(np.concatenate(tiled)) for tiled in pieces]
    if not with_tiles:
        return rows, boxes
    tiled = [
        (detector_tiles(*plane.shape[-2:]), np.stack(rows_of_tiles))
        for plane, rows_of_tiles in zip(planes, own, strict=True)
    ]
    return rows, boxes, tiled


def _in_cores(found: Detections, heat: np.ndarray, tiles: Sequence[Tile]) -> tuple[Detections, np.ndarray]:
    """The detections and heat of a batch of tiles with what lies outside each tile's core taken
    out: a detection whose peak cell is outside becomes a class the descriptor does not count,
    and the heat there becomes 0."""
    cells = heat.shape[-1]
    centres = (np.arange(cells) + 0.5) / cells
    classes = found.classes.copy()
    heat = heat.copy()
    for position, tile in enumerate(tiles):
        peak = found.cells[position, :, 0 if tile.along_rows else 1]
        classes[position, ~tile.core_positions((peak + 0.5) / cells)] = _NOT_COUNTED
        outside = ~tile.core_positions(centres)
        if tile.along_rows:
            heat[position, :, outside] = 0.0
        else:
            heat[position, :, :, outside] = 0.0
    return replace(found, classes=classes), heat


def _best_first(boxes: np.ndarray) -> np.ndarray:
    return boxes[np.argsort(-boxes[:, 4], kind="stable")]


def person_boxes(found: Any, k: int, tile: Tile | None = None) -> np.ndarray:
    """``(m, 5)`` person detections of picture ``k`` that the descriptor counts (score at least
    its lowest threshold), best first: ``x1 y1 x2 y2`` as fractions of the picture's width and
    height (the detector's input is the whole picture, stretched), then the score. With a
    ``tile`` of a wider picture, ``found`` holds that tile's detections and the fractions are
    still the picture's."""
    from counting.features.detector import PERSON
    from counting.features.detector.decode import COCO_TO_VOC

    coco_person = int(np.asarray(COCO_TO_VOC)[PERSON])
    keep = (found.classes[k] == coco_person) & (found.scores[k] >= min(THRESHOLDS))
    corners = np.clip(np.asarray(found.boxes[k][keep], np.float64) / INPUT_SIZE, 0.0, 1.0)
    if tile is not None and not tile.is_whole:
        along = [1, 3] if tile.along_rows else [0, 2]
        corners[:, along] = (tile.start + corners[:, along] * (tile.stop - tile.start)) / tile.length
    return np.column_stack([corners, found.scores[k][keep].astype(np.float64)])
