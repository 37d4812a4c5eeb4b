"""Zones drawn on a frame: each polygon's outline and a label with its count (and interval).

Used by ``video --annotated`` over the density heat map, and by anything else that shows an
annotated frame (``counting serve``'s latest frame); OpenCV's BGR uint8 images. The labels are
sized to the picture and never cover one another where their zones leave room
(counting.apply.label_drawing); every zone gets its label, inside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import shapely

from counting.apply.label_drawing import (
    Rect,
    TextStyle,
    clamped,
    draw_label,
    label_size,
    line_thickness,
    outlined_polyline,
    place_labels,
    text_style,
)
from counting.apply.zones import Zone

__all__ = ["COUNT_CORNER", "ZONE_COLOURS", "draw_zones", "zone_label", "zone_label_spots"]

# Distinct BGR colours that stay readable over the JET heat map (no pure blue, red or yellow).
ZONE_COLOURS = ((255, 255, 255), (255, 0, 255), (0, 255, 0), (255, 255, 0), (0, 128, 255), (200, 200, 200))
# Points of a zone tried for its label's centre: a grid this many steps across its bounds.
_GRID_STEPS = 9
# Where the frame's count is drawn after the zones (counting.apply.video.annotate: a tenth of the
# height at most, under half the width), as fractions of the frame: zone labels keep out of it
# where their zone leaves room, else the count would cover them.
COUNT_CORNER = (0.5, 0.1)


def zone_label(name: str, entry: dict[str, float] | None) -> str:
    """``door 12.3 [10-15]``: the zone's count, and its interval rounded outwards (the drawn
    interval holds the drawn count whenever the record's does)."""
    if entry is None:
        return name
    text = f"{name} {entry['count']:.1f}"
    if "low" in entry and "high" in entry:
        text += f" [{math.floor(entry['low']):d}-{math.ceil(entry['high']):d}]"
    return text


def _label_candidates(polygon: shapely.Geometry, size: tuple[int, int], frame: tuple[int, int]) -> list[Rect]:
    """Spots for a ``size`` label of ``polygon``, best first: centred on the zone's centre (its
    centroid when inside it), then on grid points nearer it first; spots wholly inside the zone
    before those that only have their centre in it. All on the frame."""
    height, width = frame
    centre = polygon.centroid if polygon.contains(polygon.centroid) else polygon.representative_point()
    x0, y0, x1, y1 = polygon.bounds
    points = [(centre.x, centre.y)] + sorted(
        ((x, y) for x in np.linspace(x0, x1, _GRID_STEPS) for y in np.linspace(y0, y1, _GRID_STEPS)),
        key=lambda p: (p[0] - centre.x) ** 2 + (p[1] - centre.y) ** 2,
    )
    inside, touching = [], []
    for x, y in points:
        rect = clamped((int(round(x - size[0] / 2)), int(round(y - size[1] / 2)), *size), width, height)
        box = shapely.box(rect[0], rect[1], rect[0] + rect[2], rect[1] + rect[3])
        if polygon.contains(box):
            inside.append(rect)
        elif polygon.contains(box.centroid):
            touching.append(rect)
    return inside + touching or [
        clamped((int(centre.x - size[0] / 2), int(centre.y - size[1] / 2), *size), width, height)
    ]


def zone_label_spots(
    zones: Sequence[Zone], texts: Sequence[str], frame: tuple[int, int], style: TextStyle
) -> list[Rect]:
    """Where each zone's label goes on a ``(height, width)`` frame: inside its zone, on the
    frame, clear of the labels before it and of the frame's count in the corner
    (:data:`COUNT_CORNER`) where the zone leaves room (else at its centre anyway: every zone is
    labelled)."""
    candidates = [
        _label_candidates(zone.polygon(frame), label_size(text, style), frame) for zone, text in zip(zones, texts)
    ]
    corner = (0, 0, int(COUNT_CORNER[0] * frame[1]), int(COUNT_CORNER[1] * frame[0]))
    spots = place_labels(candidates, taken=[corner], required=[True] * len(candidates))
    return [spot for spot in spots if spot is not None]


def draw_zones(
    image: np.ndarray, zones: Sequence[Zone], counts: dict[str, dict[str, float]] | None = None
) -> np.ndarray:
    """Draw ``zones`` on ``image`` (``(H, W, 3)`` uint8 BGR, drawn in place and returned), each
    with the label of its entry in ``counts`` (``{name: {"count", "low", "high"}}``, a record's
    ``"zones"``) inside it: a coloured outline over a dark one, thicker on larger pictures."""
    frame = image.shape[:2]
    thickness = line_thickness(frame)
    for index, zone in enumerate(zones):
        polygon = zone.polygon(frame)
        for part in getattr(polygon, "geoms", [polygon]):  # clipping can split a zone in pieces
            outline = np.round(np.asarray(part.exterior.coords)).astype(np.int32)
            outlined_polyline(image, outline, ZONE_COLOURS[index % len(ZONE_COLOURS)], thickness)
    # Labels after every outline, so no zone's outline crosses another's label.
    style = text_style(frame)
    texts = [zone_label(zone.name, None if counts is None else counts.get(zone.name)) for zone in zones]
    for index, (text, spot) in enumerate(zip(texts, zone_label_spots(zones, texts, frame, style))):
        draw_label(image, text, spot, ZONE_COLOURS[index % len(ZONE_COLOURS)], style, border=True)
    return image
