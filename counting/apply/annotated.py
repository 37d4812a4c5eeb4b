"""One frame counted and drawn: the density heat map, each zone with its count, and the frame's
count with its interval in the corner, as ``video --annotated`` draws its frames. For a
picture shown on its own (``counting serve``'s latest frame of a camera)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from counting.apply.people_drawing import draw_people
from counting.apply.video import annotate, overlay_label, overlay_note
from counting.apply.zone_drawing import draw_zones
from counting.apply.zones import Zone, count_frames, count_frames_with_density
from counting.heads.crowd.sparse_gate import BY_BOTH

if TYPE_CHECKING:  # annotations only: the model is imported where it counts
    from counting.model.counting_model import CountingModel

__all__ = ["annotated_frame"]


def annotated_frame(
    model: CountingModel, frame: np.ndarray, zones: Sequence[Zone] = (), own_scale: bool = False
) -> tuple[dict[str, Any], np.ndarray]:
    """Count one RGB frame ``(H, W, 3)`` uint8 and draw it: ``(record, BGR picture)``.

    The record is :func:`counting.apply.zones.count_frames`'s. A density-head model's picture shows
    its heat map and the zones; a model without a density map draws the count alone (and refuses
    zones, ZoneError). The heat map is on the model's scale, the same for every frame of a camera,
    or with ``own_scale`` on the picture's (``heatmap.picture_top``: a photo drawn on its own).
    Encode the picture with ``cv2.imencode(".jpg", picture)``.
    """
    rgb = np.asarray(frame)
    picture = np.ascontiguousarray(rgb[:, :, ::-1])  # OpenCV draws on BGR
    head = model.density_head
    if head is None and not zones:
        (record,) = count_frames(model, [rgb], ())
    else:
        from counting.heads.density.heatmap import overlay_density, picture_top

        (record,), density = count_frames_with_density(model, [rgb], zones)
        if "people" not in record or record.get("counted_by") == BY_BOTH:
            # (A wide picture the detector counted in part: the head's heat where the head counted.)
            top = head.settings.get("display_max")
            picture = overlay_density(picture, density[0], picture_top(density[0], top) if own_scale else top)
        if "people" in record:
            # Counted by the crowd model's detector (its sparse gate): its people, not a heat map.
            draw_people(picture, record["people"])
        draw_zones(picture, zones, record["zones"])
    names = model.class_names
    label = overlay_label(record) if not names else f"count {record['count']:.1f}"
    return record, annotate(picture, label, overlay_note(record))
