"""`count --annotated DIR` for detector models: each counted photo written with its detections drawn.

The boxes are the detector's (its VOC-class detections scoring at least the direct count's
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
    """CountingError unless the model counts from the detector (its boxes are what is drawn)."""
    from counting.features.detector.backbone import DETECTOR_BACKBONE

    if model.backbone != DETECTOR_BACKBONE:
        raise CountingError(
            f"{model.name}: --annotated draws the detector's boxes; this model uses {model.backbone} "
            "descriptors (train one with --descriptor detector, e.g. models/voc20.npz)"
        )


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


def write_annotated_photos(model: Any, rows: Sequence[dict], folder: Path) -> list[Path]:
    """Draw and write every counted photo of ``rows`` (``count_rows`` records) into ``folder``."""
    from counting.data.imaging import load_image
    from counting.features.detector import DEFAULT_THRESHOLD
    from counting.features.detector.draw import draw_detections
    from counting.features.detector.runner import to_input

    backbone = model.get_backbone()
    folder.mkdir(parents=True, exist_ok=True)
    targets = annotated_names([row["image"] for row in rows], folder)
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        pictures = [np.asarray(load_image(row["image"])) for row in chunk]
        found = backbone.detect([to_input(p) for p in pictures], sizes=[p.shape[:2] for p in pictures])
        for k, (row, picture) in enumerate(zip(chunk, pictures)):
            counts = {name: row[class_column("count", name)] for name in model.class_names}
            drawn = draw_detections(picture[:, :, ::-1], found, k, counts, DEFAULT_THRESHOLD)
            ok, encoded = cv2.imencode(".jpg", drawn, [cv2.IMWRITE_JPEG_QUALITY, 90])
            if not ok:
                raise CountingError(f"{targets[start + k]}: the annotated photo could not be encoded")
            atomic_write_bytes(targets[start + k], encoded.tobytes())
    return targets
