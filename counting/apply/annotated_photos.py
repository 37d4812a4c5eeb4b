"""`count --annotated DIR`: each counted photo written with what the model saw drawn on it.

Detector models draw their detections; density-head models their density map as a heat map,
each zone with its count and the frame's count with its interval (``annotated_frame``, as
``video --annotated`` draws a frame). For a detector model the boxes are the detector's (its VOC-class detections scoring at least the direct count's
threshold, each labelled where its label covers no other); the legend in the corner gives the
model's counts as count's table does (the AGP's corrected counts and their intervals,
counting.apply.detection_drawing).
One JPEG per photo, named after it (``-2``, ``-3``... when two inputs share a name), written
atomically; the photos themselves are never written, nor any file already in the folder (the
command refuses such names before any work: ``counting.core.files.check_new_files``). A photo
that can no longer be read when its turn comes (deleted or replaced since it was counted) is
skipped with one line; the others are drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from counting.core.errors import CountingError, ImageError
from counting.core.files import atomic_write_bytes

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = ["annotated_names", "check_annotated_model", "write_annotated_photos"]

BATCH = 8


def check_annotated_model(model: CountingModel) -> None:
    """CountingError unless the model has something to draw: the detector's boxes or a density map."""
    if _is_detector(model) or model.density_head is not None:
        return
    raise CountingError(
        f"{model.name}: --annotated draws a detector's boxes or a density map; this model has neither "
        f"({model.backbone} descriptors of the whole picture): use e.g. models/voc20.npz or models/crowd.npz"
    )


def _is_detector(model: CountingModel) -> bool:
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


def write_annotated_photos(
    model: CountingModel,
    rows: Sequence[dict],
    folder: Path,
    zones: Sequence[Any] = (),
    *,
    targets: Sequence[Path] | None = None,
    written: list[Path] | None = None,
    skip: Callable[[str], None] | None = None,
    show_above: float | None = None,
) -> list[Path]:
    """Draw and write every counted photo of ``rows`` (``count_rows`` records) into ``folder``;
    ``zones`` (counting.apply.zones) are drawn on a density model's photos. Returns the files
    written.

    ``targets``: each row's file (default :func:`annotated_names` of the rows), the names the
    caller checked before any work; ``written``: a list that each file is appended to as soon as
    it is written (what a Ctrl-C reports); ``skip(message)``: told of a photo that could not be
    read again, which is left out (without it the ImageError stops the run); ``show_above``: a
    per-class model's legend lists the classes counted at least this (``count --show-above``,
    default the table's 0.5), as its table does."""
    if targets is None:
        targets = annotated_names([row["image"] for row in rows], folder)
    if written is None:
        written = []
    folder.mkdir(parents=True, exist_ok=True)
    if not _is_detector(model):
        _write_density_photos(model, rows, targets, zones, written, skip)
    else:
        _write_detector_photos(model, rows, targets, written, skip, show_above)
    return written


def _picture(source: str, skip: Callable[[str], None] | None) -> np.ndarray | None:
    """The photo's pixels, or None (and ``skip`` told) when it cannot be read any more."""
    from counting.data.imaging import load_image

    try:
        return np.asarray(load_image(source))
    except ImageError as error:
        if skip is None:
            raise
        skip(f"{error} (not drawn)")
        return None


def _write_jpeg(target: Path, drawn: np.ndarray, written: list[Path]) -> None:
    ok, encoded = cv2.imencode(".jpg", drawn, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise CountingError(f"{target}: the annotated photo could not be encoded")
    atomic_write_bytes(target, encoded.tobytes())
    written.append(target)


def _write_detector_photos(
    model: CountingModel,
    rows: Sequence[dict],
    targets: Sequence[Path],
    written: list[Path],
    skip: Callable[[str], None] | None,
    show_above: float | None = None,
) -> None:
    """BATCH photos at a time through the detector, its boxes drawn on each."""
    from counting.apply.detection_drawing import LEGEND_THRESHOLD, draw_detections
    from counting.features.detector import DEFAULT_THRESHOLD

    backbone = model.get_backbone()
    for start in range(0, len(rows), BATCH):
        chunk = [
            (row, target, picture)
            for row, target in zip(rows[start : start + BATCH], targets[start : start + BATCH])
            if (picture := _picture(row["image"], skip)) is not None
        ]
        if not chunk:
            continue
        # The backbone's own input (stretched or letterboxed) and its way back to picture pixels.
        found = backbone.detect_pictures([picture for _, _, picture in chunk])
        for k, (row, target, picture) in enumerate(chunk):
            drawn = draw_detections(
                picture[:, :, ::-1],
                found,
                k,
                model.class_names,
                row,
                DEFAULT_THRESHOLD,
                legend_threshold=LEGEND_THRESHOLD if show_above is None else show_above,
            )
            _write_jpeg(target, drawn, written)


def _write_density_photos(
    model: CountingModel,
    rows: Sequence[dict],
    targets: Sequence[Path],
    zones: Sequence[Any],
    written: list[Path],
    skip: Callable[[str], None] | None,
) -> None:
    """One photo at a time (their sizes differ): heat map (on the photo's own scale), zones and
    count, drawn by annotated_frame from its own pass over the decoded photo (one more forward
    pass per photo)."""
    from counting.apply.annotated import annotated_frame

    for row, target in zip(rows, targets):
        picture = _picture(row["image"], skip)
        if picture is None:
            continue
        try:
            _, drawn = annotated_frame(model, picture, zones, own_scale=True)
        except ImageError as error:  # the file was replaced by one the model cannot take
            if skip is None:
                raise
            skip(f"{row['image']}: {error} (not drawn)")
            continue
        _write_jpeg(target, drawn, written)
