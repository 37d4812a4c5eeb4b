"""The sparse gate as a stage of the count (counting.heads.stage): a crowd model hands sparse
pictures, or sparse tiles of a wide one, to the COCO detector's person count.

Contract. Given the batch the regressor counted and the pictures, :class:`SparseGateStage` asks
the detector only about the pictures the gate's screen lets through, and gives: the gate's
counts; ``people``, per picture, the person boxes the detector's count took (None where the head
counted it, :class:`~counting.heads.crowd.sparse_gate.PartPeople` where it took some tiles of a
wide picture); ``readings`` where the count is disputed (the count with the head limit lifted,
NaN elsewhere: the interval stage reaches it); ``counted_by``; and, where someone reads the
density maps, the map of the detector's people in place of the head's. Without the detector (no
npm, a broken conversion) it warns once and the head's counts stand. The gate itself, its
screen and why each part is built so: :mod:`counting.heads.crowd.sparse_gate`, docs/sparse-gate.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from counting.core.errors import BackboneError
from counting.features.detector.evidence import PERSON_QUANTITIES, map_tiles
from counting.heads.crowd.sparse_gate import (
    PartPeople,
    SparseGate,
    boxes_in_tiles,
    person_density,
    routes,
    tile_shares,
    tiled_density,
)
from counting.heads.familiarity import Familiarity
from counting.heads.results import CountBatch
from counting.heads.stage import Pictures

__all__ = ["GateReading", "SparseGateStage", "photos_in_grids"]


@dataclass
class GateReading:
    """What the gate made of a batch: counts, people per picture, the maps of the wide pictures it
    counted in part (by index), and the disputed counts' readings (NaN elsewhere)."""

    counts: np.ndarray
    people: list
    mixed: dict[int, np.ndarray]
    readings: np.ndarray


@dataclass(frozen=True)
class SparseGateStage:
    """The count's sparse-gate stage. Owns the model file's ``sparse_gate`` section."""

    section: ClassVar[str] = "sparse_gate"
    field: ClassVar[str] = "sparse_gate"

    gate: SparseGate
    familiarity: Familiarity
    stride: int  # the density head's: the detector's tiles of a map of a given (h, w)

    def __call__(self, batch: CountBatch, pictures: Pictures) -> CountBatch:
        rows = pictures.rows
        wide = self.wide_maps(rows)
        reading = self.read(batch.counts, batch.familiarity, rows.probes, pictures, wide, rows.wide_probes)
        ok = pictures.ok
        counts = np.where(ok, reading.counts, np.nan)
        readings = np.where(ok, reading.readings, np.nan)
        density = batch.density
        if any(found is not None for found in reading.people):
            density = self._show_people(reading, pictures, density)
        return replace(
            batch,
            counts=counts,
            readings=readings,
            people=reading.people,
            counted_by=routes(reading.people),
            density=density,
        )

    def map_tiles(self, shape: tuple[int, ...]) -> list:
        """The detector's tiles of the prepared input behind a density map of ``shape`` ``(h, w)``."""
        return map_tiles(shape[-2:], self.stride)

    def wide_maps(self, rows: Any) -> dict[int, np.ndarray]:
        """The head's maps, by picture, of the pictures the detector sees in more than one tile
        (the gate reads them tile by tile): kept by the head's rows of files, picked from a
        batch's maps."""
        if rows.wide_maps is not None:
            return rows.wide_maps
        density = rows.density
        if density is None or len(density) == 0 or len(self.map_tiles(np.shape(density)[-2:])) == 1:
            return {}
        return {k: np.asarray(density[k]) for k in range(len(density))}

    def read(
        self,
        counts: np.ndarray,
        familiarity: np.ndarray | None,
        probes: np.ndarray | None,
        pictures: Pictures,
        wide_maps: dict[int, np.ndarray],
        wide_probes: dict[int, np.ndarray] | None = None,
    ) -> GateReading:
        """The gate on a batch. The detector is asked only about the pictures the screen lets
        through (``pictures.evidence``); ``wide_maps`` and ``wide_probes`` are the head's maps
        and the tiles' own familiarity probes of pictures read tile by tile (``sparse_gate.tile_probes``)."""
        gate = self.gate
        unchanged = GateReading(counts, [None] * len(counts), {}, np.full(len(counts), np.nan))
        projected = self.familiarity.project(probes)
        shares = [np.ones(1)] * len(counts)
        for k, density in wide_maps.items():
            shares[k] = tile_shares(density, self.map_tiles(np.shape(density)))
        # Each tile's own familiarity and axes: a crowd beside an empty photo is, whole, half unlike a crowd.
        seen = {
            k: (self.familiarity.scores(tile_probes), self.familiarity.project(tile_probes))
            for k, tile_probes in (wide_probes or {}).items()
        }
        wanted = gate.needs_detector_tiles(counts, shares, familiarity, projected, seen)
        if not wanted.any():
            return unchanged
        found = _without_detector(pictures.evidence, wanted)
        if found is None:
            return unchanged
        _, boxes, tiled = found
        rows = [np.full((len(part), len(PERSON_QUANTITIES)), np.nan) for part in shares]
        for k, picture in enumerate(tiled):
            if picture is None:  # not asked (its head count stands) or unreadable
                continue
            tiles, rows[k] = picture
            # The detector's own tiles of the picture (its prepared input's), the head's map shared by them.
            shares[k] = tile_shares(wide_maps.get(k), tiles)
        gated, handed = gate.apply_tiles(counts, shares, rows, familiarity, projected, seen)
        lifted, handed_if_lifted = gate.apply_tiles(counts, shares, rows, familiarity, projected, seen, limited=False)
        disputed = np.array([(free & ~taken).any() for free, taken in zip(handed_if_lifted, handed, strict=True)])
        readings = np.where(disputed, lifted, np.nan) if len(disputed) else unchanged.readings
        reading = GateReading(gated, [None] * len(counts), {}, readings)
        for k, taken in enumerate(handed):
            if taken.any():
                self._hand_over(reading, k, taken, tiled[k][0], boxes[k], wide_maps, float(counts[k]))
        return reading

    def _hand_over(
        self,
        reading: GateReading,
        k: int,
        taken: np.ndarray,
        tiles: list,
        boxes: np.ndarray,
        wide_maps: dict[int, np.ndarray],
        head_count: float,
    ) -> None:
        """Record the people of picture ``k`` the detector's count took (in the tiles ``taken``):
        all of them, or a wide picture's part with the head's map in its other tiles."""
        chosen = self.gate.counted_boxes(boxes_in_tiles(boxes, tiles, taken))
        if taken.all():
            reading.people[k] = chosen
            return
        reading.people[k] = PartPeople.of(chosen)
        if k in wide_maps:
            reading.mixed[k] = tiled_density(wide_maps[k], head_count, chosen, tiles, taken)

    def _show_people(self, reading: GateReading, pictures: Pictures, density: np.ndarray | None) -> np.ndarray | None:
        """A picture the detector counted shows its people, not the head's reading of it (a wide
        picture it counted in part: the head's map in the other tiles): in the batch's maps, and
        to whoever reads the pictures' maps (zones of files)."""
        if density is not None:
            density = np.array(density, dtype=float)
        for k, found in enumerate(reading.people):
            if found is None or not pictures.ok[k]:
                continue
            grid = density.shape[1:] if density is not None else pictures.map_grid(k)
            if grid is None:
                continue
            shown = reading.mixed[k] if k in reading.mixed else person_density(found, tuple(grid))
            if density is not None:
                density[k] = shown
            pictures.show_people(k, shown)
        return density


def photos_in_grids(grids: Sequence[tuple[int, int]] | np.ndarray, stride: int) -> np.ndarray:
    """How many photos the gate reads each picture as (``sparse_gate.photos_in``: the detector's
    tiles of a picture wider than 2:1), from its density map's ``(h, w)`` on a head of ``stride``;
    1 where no map was made."""
    return np.array([len(map_tiles((h, w), stride)) if h and w else 1 for h, w in np.asarray(grids, dtype=int)])


def _without_detector(compute: Any, *args: Any) -> Any:
    """``compute(*args)`` (the detector's person rows), or None with one warning when the detector
    cannot be had (no npm, no $COUNTING_DETECTOR_SOURCE, a broken conversion): the model then
    counts by its density head alone, which over-counts some sparse photos, instead of failing."""
    try:
        return compute(*args)
    except BackboneError as error:
        warnings.warn(
            f"{str(error).splitlines()[0]}; counting by the density head alone (sparse photos may be over-counted)",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
