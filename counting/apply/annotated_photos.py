"""`count --annotated DIR`: each counted photo written with what the model saw drawn on it.

Detector models draw their detections; density-head models their density map as a heat map,
each zone with its count and the frame's count with its interval (``annotated_frame``, as
``video --annotated`` draws a frame). For a detector model the boxes are the detector's (its VOC-class detections scoring at least the direct count's
threshold); the counts in the corner are the model's (the AGP's corrected counts, rounded).
One JPEG per photo, named after it (``-2``, ``-3``... when two inputs share a name), written
atomically; the photos themselves are never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from counting.core.columns import class_column
from counting.core.errors import CountingError
from counting.core.files import atomic_write_bytes

__all__ = ["annotated_names", "check_annotated_model", "write_annotated_photos"]

BATCH = 8


def check_annotated_model(model: Any) -> None:
    """CountingError unless the model has something to draw: the detector's boxes or a density map."""
    if _is_detector(model) or getattr(model, "density_head", None) is not None:
        return
    raise CountingError(
        f"{model.name}: --annotated draws a detector's boxes or a density map; this model has neither "
        f"({model.backbone} descriptors of the whole picture): use e.g. models/voc20.npz or models/crowd.npz"
    )


def _is_detector(model: Any) -> bool:
    from counting.features.detector.backbone import DETECTOR_BACKBONES

    return model.backbone in DETECTOR_BACKBONES


def annotated_names(sources: Sequence[str], folder: Path) -> list[Path]:
    """One output per source in ``folder``: the photo's stem + ``.jpg``, made unique."""
    taken: set[str] = set()
    names = []
    for source in sources:
        stem, name, k = Path(source).stem, "", 1
        while not name or name in taken:
            name = f"{stem}.jpg" if k == 1 else f"{stem}-{k}.jpg"
            k += 1
        taken.add(name)
        names.append(folder / name)
    return names


def write_annotated_photos(model: Any, rows: Sequence[dict], folder: Path, zones: Sequence[Any] = ()) -> list[Path]:
    """Draw and write every counted photo of ``rows`` (``count_rows`` records) into ``folder``;
    ``zones`` (counting.apply.zones) are drawn on a density model's photos."""
    if not _is_detector(model):
        return _write_density_photos(model, rows, folder, zones)
    from counting.data.imaging import load_image
    from counting.features.detector import DEFAULT_THRESHOLD
    from counting.features.detector.draw import draw_detections

    backbone = model.get_backbone()
    folder.mkdir(parents=True, exist_ok=True)
    targets = annotated_names([row["image"] for row in rows], folder)
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        pictures = [np.asarray(load_image(row["image"])) for row in chunk]
        # The backbone's own input (stretched or letterboxed) and its way back to picture pixels.
        found = backbone.detect_pictures(pictures)
        for k, (row, picture) in enumerate(zip(chunk, pictures)):
            counts = {name: row[class_column("count", name)] for name in model.class_names}
            drawn = draw_detections(picture[:, :, ::-1], found, k, counts, DEFAULT_THRESHOLD)
            ok, encoded = cv2.imencode(".jpg", drawn, [cv2.IMWRITE_JPEG_QUALITY, 90])
            if not ok:
                raise CountingError(f"{targets[start + k]}: the annotated photo could not be encoded")
            atomic_write_bytes(targets[start + k], encoded.tobytes())
    return targets


def _write_density_photos(model: Any, rows: Sequence[dict], folder: Path, zones: Sequence[Any]) -> list[Path]:
    """One photo at a time (their sizes differ): heat map (on the photo's own scale), zones and
    count, drawn by annotated_frame from its own pass over the decoded photo (one more forward
    pass per photo)."""
    from counting.apply.annotated import annotated_frame
    from counting.data.imaging import load_image

    folder.mkdir(parents=True, exist_ok=True)
    targets = annotated_names([row["image"] for row in rows], folder)
    for row, target in zip(rows, targets):
        _, drawn = annotated_frame(model, np.asarray(load_image(row["image"])), zones, own_scale=True)
        ok, encoded = cv2.imencode(".jpg", drawn, [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise CountingError(f"{target}: the annotated photo could not be encoded")
        atomic_write_bytes(target, encoded.tobytes())
    return targets
