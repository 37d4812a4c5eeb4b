"""Text drawn on pictures so that it reads at the sizes people look at them: a 640x480 frame, a
4032x3024 phone photo, a frame shrunk into a dashboard card.

Every label is light text in a dark box (it reads over a bright floor, a dark coat or the heat
map alike), its size set by the picture's shorter side (:func:`text_style`), and labels that
would cover one another are placed by :func:`place_labels`. Used by the zones, the detector's
boxes and legend, and the people a crowd model's detector counted; OpenCV's BGR uint8 images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

__all__ = [
    "CAP_SHARE",
    "MIN_CAP_PX",
    "LABEL_BACKGROUND",
    "Rect",
    "TextStyle",
    "clamped",
    "draw_label",
    "label_size",
    "line_thickness",
    "outlined_polyline",
    "outlined_rectangle",
    "overlaps",
    "place_labels",
    "text_style",
]

FONT = cv2.FONT_HERSHEY_SIMPLEX
# Cap height of the labels as a share of the picture's shorter side, and its floor in pixels
# (OpenCV's text height; the ink of a capital is about 0.8 of it): a 640x480 frame gets capitals
# of 12 px of ink (the zone labels had 7 there, about 5 once the dashboard shrank the frame into
# its card), a 4032x3024 photo of 70 px.
CAP_SHARE = 0.028
MIN_CAP_PX = 15
# The dark box every label is drawn in (BGR).
LABEL_BACKGROUND = (16, 16, 16)
# Height of a capital at font scale 1 (Hershey simplex): sizes are asked as cap heights.
_CAP_AT_SCALE_1 = cv2.getTextSize("H", FONT, 1.0, 1)[0][1]

Rect = tuple[int, int, int, int]  # x, y, width, height in picture pixels


@dataclass(frozen=True)
class TextStyle:
    """How large a picture's labels are drawn: OpenCV's font scale and stroke, and the box's padding."""

    font_scale: float
    thickness: int
    pad: int


def text_style(shape: Sequence[int], share: float = CAP_SHARE, floor: float = MIN_CAP_PX) -> TextStyle:
    """The labels' style on a picture of ``shape`` ``(height, width, ...)``: capitals ``share`` of
    its shorter side high, at least ``floor`` pixels (a tiny picture's labels may then cover
    more of it, but they can still be read)."""
    cap = max(float(floor), share * min(int(shape[0]), int(shape[1])))
    return TextStyle(font_scale=cap / _CAP_AT_SCALE_1, thickness=max(1, round(cap / 7)), pad=max(2, round(cap * 0.35)))


def line_thickness(shape: Sequence[int]) -> int:
    """The coloured stroke of outlines and boxes on a picture of ``shape``: 2 px on a 640x480
    frame, 13 on a 4032x3024 photo (a fixed 1-2 px vanished on large photos)."""
    return max(2, round(min(int(shape[0]), int(shape[1])) / 240))


def label_size(text: str, style: TextStyle) -> tuple[int, int]:
    """``(width, height)`` of ``text``'s box, padding included."""
    (width, height), baseline = cv2.getTextSize(text, FONT, style.font_scale, style.thickness)
    return width + 2 * style.pad, height + baseline + 2 * style.pad


def draw_label(
    image: np.ndarray, text: str, rect: Rect, colour: tuple[int, int, int], style: TextStyle, border: bool = False
) -> None:
    """Draw ``text`` in ``colour`` in a dark box at ``rect`` (from :func:`label_size`), in place;
    ``border``: a thin frame in ``colour`` too, which ties the box to what it labels."""
    x, y, width, height = rect
    cv2.rectangle(image, (x, y), (x + width - 1, y + height - 1), LABEL_BACKGROUND, cv2.FILLED)
    if border:
        edge = max(1, style.thickness // 2)
        cv2.rectangle(image, (x, y), (x + width - 1, y + height - 1), colour, edge)
    (_, text_height), _ = cv2.getTextSize(text, FONT, style.font_scale, style.thickness)
    origin = (x + style.pad, y + style.pad + text_height)
    cv2.putText(image, text, origin, FONT, style.font_scale, colour, style.thickness, cv2.LINE_AA)


def _under_stroke(thickness: int) -> int:
    """The dark stroke under a coloured one: wider by a rim each side (3 px at least, 2 of them
    left dark by anti-aliasing) that shows on a light floor."""
    return thickness + 2 * max(3, (thickness + 1) // 2)


def outlined_polyline(image: np.ndarray, points: np.ndarray, colour: tuple[int, int, int], thickness: int) -> None:
    """A closed outline in ``colour`` over a wider dark one (reads on light and dark pictures), in place."""
    cv2.polylines(image, [points], True, LABEL_BACKGROUND, _under_stroke(thickness), cv2.LINE_AA)
    cv2.polylines(image, [points], True, colour, thickness, cv2.LINE_AA)


def outlined_rectangle(
    image: np.ndarray, corners: tuple[int, int, int, int], colour: tuple[int, int, int], thickness: int
) -> None:
    """A box ``(x1, y1, x2, y2)`` in ``colour`` over a wider dark one, in place."""
    x1, y1, x2, y2 = corners
    cv2.rectangle(image, (x1, y1), (x2, y2), LABEL_BACKGROUND, _under_stroke(thickness))
    cv2.rectangle(image, (x1, y1), (x2, y2), colour, thickness)


def overlaps(a: Rect, b: Rect) -> bool:
    """Whether two rectangles share any pixel."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def clamped(rect: Rect, width: int, height: int) -> Rect:
    """``rect`` moved (not shrunk) to lie on a ``width`` x ``height`` picture where it fits."""
    x, y, w, h = rect
    return (int(min(max(x, 0), max(width - w, 0))), int(min(max(y, 0), max(height - h, 0))), w, h)


def place_labels(
    candidates: Sequence[Sequence[Rect]], taken: Sequence[Rect] = (), required: Sequence[bool] | None = None
) -> list[Rect | None]:
    """Greedy placement, in the order given: each label at its first candidate rectangle that
    overlaps neither ``taken`` nor a label placed before it; None where every candidate collides
    (the label is left out) unless ``required[i]``, when it takes its first candidate anyway
    (a zone must always be labelled). No two placed labels overlap, bar required ones."""
    placed: list[Rect] = list(taken)
    result: list[Rect | None] = []
    for index, options in enumerate(candidates):
        spot = next((rect for rect in options if not any(overlaps(rect, other) for other in placed)), None)
        if spot is None and required is not None and required[index] and options:
            spot = options[0]
        if spot is not None:
            placed.append(spot)
        result.append(spot)
    return result
