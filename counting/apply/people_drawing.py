"""People drawn on a frame: the person boxes a crowd model's detector counted (its sparse gate
handed the frame over), drawn instead of the density heat map by ``count --annotated``,
``video --annotated`` and ``counting serve``'s latest frame; OpenCV's BGR uint8 images.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from counting.apply.label_drawing import line_thickness, outlined_rectangle

__all__ = ["PEOPLE_COLOUR", "draw_people"]

# BGR green: reads on photos and differs from the zones' outlines.
PEOPLE_COLOUR = (60, 220, 60)


def draw_people(picture: np.ndarray, people: Sequence[Sequence[float]]) -> None:
    """Draw person boxes ``[x1, y1, x2, y2, score]`` (picture pixels) on a BGR picture, in place:
    green over a dark rim, thicker on larger pictures (counting.apply.label_drawing)."""
    height, width = picture.shape[:2]
    thickness = line_thickness(picture.shape)
    for x1, y1, x2, y2, _ in people:
        corners = np.clip([x1, y1, x2, y2], 0, [width - 1, height - 1, width - 1, height - 1]).round().astype(int)
        outlined_rectangle(picture, tuple(int(v) for v in corners), PEOPLE_COLOUR, thickness)
