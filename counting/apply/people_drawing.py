"""People drawn on a frame: the person boxes a crowd model's detector counted (its sparse gate
handed the frame over), drawn instead of the density heat map by ``count --annotated``,
``video --annotated`` and ``counting serve``'s latest frame; OpenCV's BGR uint8 images.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

__all__ = ["PEOPLE_COLOUR", "draw_people"]

# BGR green: reads on photos and differs from the zones' outlines.
PEOPLE_COLOUR = (60, 220, 60)


def draw_people(picture: np.ndarray, people: Sequence[Sequence[float]]) -> None:
    """Draw person boxes ``[x1, y1, x2, y2, score]`` (picture pixels) on a BGR picture, in place."""
    height, width = picture.shape[:2]
    thickness = max(1, round(min(height, width) / 300))
    for x1, y1, x2, y2, _ in people:
        corners = np.clip([x1, y1, x2, y2], 0, [width - 1, height - 1, width - 1, height - 1]).round().astype(int)
        cv2.rectangle(
            picture, (int(corners[0]), int(corners[1])), (int(corners[2]), int(corners[3])), PEOPLE_COLOUR, thickness
        )
