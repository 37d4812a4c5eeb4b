"""The pictures a count runs on, as the stages see them (counting.heads.stage.Pictures): image
files (read again for the detector, their maps handed to whoever reads them) or the prepared
inputs of one batch (frames, uploads, arrays)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from counting.core.errors import ImageError
from counting.heads.applied import PathRows, PreparedRows

__all__ = ["PathPictures", "PreparedPictures", "person_rows"]


@dataclass
class PreparedPictures:
    """Prepared inputs of one shape, counted in one batch: every one is counted; the gate stage
    puts the detector's people into the batch's own maps."""

    tensors: Sequence[Any]
    backbone: Any  # its normalisation is the detector's too: it takes the same prepared input
    rows: PreparedRows

    @property
    def ok(self) -> np.ndarray:
        return np.ones(len(self.tensors), dtype=bool)

    def evidence(self, wanted: np.ndarray) -> tuple[np.ndarray, list, list]:
        # The detector's modules bring torch (2 s): imported when a picture first needs it.
        from counting.features.detector.evidence import PERSON_QUANTITIES, person_evidence

        persons = np.full((len(self.tensors), len(PERSON_QUANTITIES)), np.nan)
        boxes: list = [None] * len(self.tensors)
        tiled: list = [None] * len(self.tensors)
        chosen = np.flatnonzero(wanted)
        persons[chosen], found, tiles = person_evidence(
            [self.tensors[k] for k in chosen], self.backbone.normalisation, with_boxes=True, with_tiles=True
        )
        for k, picture, pieces in zip(chosen, found, tiles, strict=True):
            boxes[k], tiled[k] = picture, pieces
        return persons, boxes, tiled

    def show_people(self, index: int, density: np.ndarray) -> None:
        pass  # the batch's maps hold them (the gate stage replaces them there)

    def map_grid(self, index: int) -> tuple[int, int] | None:
        return None


@dataclass
class PathPictures:
    """Image files: the detector reads them again (one that cannot be read a second time is no
    longer counted), and ``on_density(source, map)``, when given, gets the map of the people the
    detector counted in place of the head's (zones, counting.apply.zones)."""

    sources: list[str]
    rows: PathRows
    backbone: Any
    preprocessing: Any
    on_density: Callable[[str, np.ndarray], None] | None = None

    @property
    def ok(self) -> np.ndarray:
        return self.rows.ok

    def evidence(self, wanted: np.ndarray) -> tuple[np.ndarray, list, list]:
        asked = self.rows.ok & wanted
        readable = asked.copy()
        found = person_rows(self.sources, readable, self.rows.errors, self.backbone, self.preprocessing)
        self.rows.ok[asked & ~readable] = False  # could not be read a second time
        return found

    def show_people(self, index: int, density: np.ndarray) -> None:
        if self.on_density is not None:
            self.on_density(self.sources[index], density)

    def map_grid(self, index: int) -> tuple[int, int] | None:
        if self.on_density is None or self.rows.grids is None:
            return None
        return int(self.rows.grids[index][0]), int(self.rows.grids[index][1])


def person_rows(
    sources: Sequence[str],
    ok: np.ndarray,
    errors: dict[str, str],
    backbone: Any,
    preprocessing: Any,
    on_prepared: Callable[[int, Any], None] | None = None,
) -> tuple[np.ndarray, list, list]:
    """``(rows, boxes, tiles)``: the detector's person rows of the pictures marked in ``ok`` (NaN
    elsewhere), their person boxes and their tiles with the tiles' rows (``person_evidence``'s;
    None elsewhere), from the same prepared inputs as the maps (the extraction pipeline's decode
    route and message: not a second tiny-picture warning). A picture that cannot be read again is
    dropped from ``ok`` and named in ``errors``. ``on_prepared(index, tensor)`` sees each prepared input."""
    # The detector's and the extraction's modules bring torch (2 s): imported when first needed.
    from counting.features.detector.evidence import DETECTOR_BATCH, PERSON_QUANTITIES, person_evidence
    from counting.features.extract import prepare_path

    persons = np.full((len(sources), len(PERSON_QUANTITIES)), np.nan)
    boxes: list = [None] * len(sources)
    tiled: list = [None] * len(sources)
    readable = np.flatnonzero(ok)
    for start in range(0, len(readable), DETECTOR_BATCH):
        indices, tensors = [], []
        for k in readable[start : start + DETECTOR_BATCH]:
            prepared = prepare_path(str(sources[k]), backbone, preprocessing, warn=False)
            if isinstance(prepared, ImageError):
                ok[k] = False
                errors[str(sources[k])] = str(prepared)
                continue
            tensors.append(prepared)
            indices.append(k)
            if on_prepared is not None:
                on_prepared(int(k), prepared)
        if tensors:
            persons[indices], found, tiles = person_evidence(
                tensors, backbone.normalisation, with_boxes=True, with_tiles=True
            )
            for k, picture, pieces in zip(indices, found, tiles, strict=True):
                boxes[k], tiled[k] = picture, pieces
    return persons, boxes, tiled
