"""A photo with a detector model's detections drawn (``count --annotated`` with e.g.
models/voc20.npz): boxes coloured by class, each box's class and score where its label fits
without covering another, and a legend in the corner with the counts exactly as count's table
shows them (the model's corrected counts with one decimal and their intervals, not rounded
detections: "bus 1.6 [0.9–2.4]").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from counting.apply.label_drawing import (
    Rect,
    TextStyle,
    clamped,
    draw_label,
    label_size,
    line_thickness,
    outlined_rectangle,
    place_labels,
    text_style,
)
from counting.core.columns import class_column
from counting.data.datasets.voc import VOC_CLASSES
from counting.features.detector.decode import COCO_TO_VOC, Detections
from counting.features.detector.draw import CLASS_COLOURS

__all__ = ["LEGEND_THRESHOLD", "box_label_spots", "class_count_text", "draw_detections", "legend_lines"]

# The classes the legend lists: a count of at least this, as count's table shows them (its
# default --show-above, counting.cli.multiclass_output.SHOW_THRESHOLD).
LEGEND_THRESHOLD = 0.5
# Box labels are a little smaller than the legend's: there are many of them.
_BOX_LABEL_SHARE = 0.02
_BOX_LABEL_FLOOR = 11
_WHITE = (255, 255, 255)


def class_count_text(name: str, row: Mapping[str, Any]) -> str:
    """``bus 1.6 [0.9–2.4]``: a class's count in a counts row with its interval (when the model
    has one), as count's table writes it."""
    text = f"{name} {row[class_column('count', name)]:.1f}"
    if class_column("low", name) in row:
        text += f" [{row[class_column('low', name)]:.1f}–{row[class_column('high', name)]:.1f}]"
    return text


def legend_lines(
    class_names: Sequence[str], row: Mapping[str, Any], threshold: float = LEGEND_THRESHOLD
) -> list[tuple[str, str | None]]:
    """The legend of a counts row: ``(text, class or None)`` per line, the total first, then each
    class counted at ``threshold`` or more, largest first (the table's order)."""
    counts = {name: float(row[class_column("count", name)]) for name in class_names}
    present = sorted((name for name in class_names if counts[name] >= threshold), key=lambda n: -counts[n])
    total = float(row["total"]) if "total" in row else sum(counts.values())
    lines: list[tuple[str, str | None]] = [(f"total {total:.1f}", None)]
    lines += [(class_count_text(name, row), name) for name in present]
    if not present:
        lines.append((f"no class counted {threshold:g} or more", None))
    return lines


def _colour(name: str | None) -> tuple[int, int, int]:
    return tuple(int(c) for c in CLASS_COLOURS[VOC_CLASSES.index(name)]) if name in VOC_CLASSES else _WHITE


def _text_colour(name: str | None) -> tuple[int, int, int]:
    """The class's colour halfway to white: its hue, but light enough to read on the dark box
    (the full-saturation blue of "person" was hard to read there)."""
    return tuple((c + 255) // 2 for c in _colour(name))


def _draw_legend(picture: np.ndarray, lines: Sequence[tuple[str, str | None]], style: TextStyle) -> Rect:
    """The legend's lines top left, one dark box each; the rectangle they cover."""
    top, widest = 0, 0
    for text, name in lines:
        width, height = label_size(text, style)
        draw_label(picture, text, (0, top, width, height), _text_colour(name), style)
        top, widest = top + height, max(widest, width)
    return (0, 0, widest, top)


def box_label_spots(
    boxes: Sequence[tuple[int, int, int, int]],
    sizes: Sequence[tuple[int, int]],
    frame: tuple[int, int],
    taken: Sequence[Rect] = (),
) -> list[Rect | None]:
    """Where each box's label goes, in the order given (best score first): above the box, else
    inside its top, else under it; None where each of those would cover a label placed before
    it or ``taken`` (the legend): that box is drawn without its label."""
    height, width = frame
    candidates = []
    for (x1, y1, _, y2), (w, h) in zip(boxes, sizes):
        spots = [(x1, y1 - h, w, h), (x1, y1, w, h), (x1, y2, w, h)]
        candidates.append([clamped(spot, width, height) for spot in spots])
    return place_labels(candidates, taken)


def draw_detections(
    bgr: np.ndarray,
    found: Detections,
    index: int,
    class_names: Sequence[str],
    row: Mapping[str, Any],
    threshold: float = 0.3,
    legend_threshold: float = LEGEND_THRESHOLD,
) -> np.ndarray:
    """A copy of ``bgr`` (H, W, 3) with detection ``index``'s VOC boxes scoring >= ``threshold``
    (boxes in this picture's pixels), their labels where they fit, and the legend of the counts
    ``row`` (:func:`legend_lines`) top left."""
    picture = np.ascontiguousarray(bgr).copy()
    height, width = picture.shape[:2]
    voc_of_coco = np.full(80, -1)
    voc_of_coco[COCO_TO_VOC] = np.arange(len(VOC_CLASSES))
    voc = voc_of_coco[found.classes[index]]
    keep = (voc >= 0) & (found.scores[index] >= threshold)
    order = np.argsort(-found.scores[index][keep], kind="stable")  # the surest boxes get their labels first
    boxes = [
        tuple(int(round(v)) for v in np.clip(box, 0, [width - 1, height - 1, width - 1, height - 1]))
        for box in found.boxes[index][keep][order]
    ]
    classes, scores = voc[keep][order], found.scores[index][keep][order]
    thickness = line_thickness(picture.shape)
    for box, cls in zip(boxes, classes):
        outlined_rectangle(picture, box, _colour(VOC_CLASSES[cls]), thickness)
    style = text_style(picture.shape)
    legend = _draw_legend(picture, legend_lines(class_names, row, legend_threshold), style)
    box_style = text_style(picture.shape, _BOX_LABEL_SHARE, _BOX_LABEL_FLOOR)
    texts = [f"{VOC_CLASSES[cls]} {score:.2f}" for cls, score in zip(classes, scores)]
    spots = box_label_spots(boxes, [label_size(text, box_style) for text in texts], (height, width), [legend])
    for text, cls, spot in zip(texts, classes, spots):
        if spot is not None:
            draw_label(picture, text, spot, _text_colour(VOC_CLASSES[cls]), box_style)
    return picture
