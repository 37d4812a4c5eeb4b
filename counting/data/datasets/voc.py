"""PASCAL VOC-2007 object counting: per-image counts of the 20 classes.

Layout: ``VOCdevkit/VOC2007/{JPEGImages,Annotations,ImageSets/Main}``; ``root`` may be
``VOCdevkit`` or ``VOCdevkit/VOC2007``. Standard split: ``ImageSets/Main/trainval.txt`` train,
``test.txt`` test (either list may be absent, e.g. a test-only subset).

Objects flagged ``difficult`` are left out of the counts by default, as in the counting ground
truth of Chattopadhyay et al. (CVPR 2017) that the paper compares with on VOC-2007;
``include_difficult=True`` counts them too.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np

from counting.core.errors import DatasetError
from counting.data.datasets.base import Annotated, CountingDataset, select_samples
from counting.data.datasets.splits import parse_split

VOC_CLASSES: tuple[str, ...] = (
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)
IMAGE_SETS = {"trainval": "train", "test": "test"}
_CLASS_INDEX = {name: i for i, name in enumerate(VOC_CLASSES)}


def read_voc(root: Path | str, split: str = "standard", include_difficult: bool = False) -> CountingDataset:
    """Read VOC-2007 counts from ``root`` (VOCdevkit or VOCdevkit/VOC2007)."""
    spec = parse_split(split)
    year_root = _year_root(Path(root).expanduser().resolve())
    listed = _image_sets(year_root)
    if not listed:
        # Without the lists only a random or range split can say what is test.
        listed = {path.stem: None for path in sorted((year_root / "Annotations").glob("*.xml"))}
    entries = [
        _annotation(year_root, image_id, part, position, include_difficult)
        for position, (image_id, part) in enumerate(listed.items(), start=1)
    ]
    samples = select_samples(entries, spec, source=year_root, sequence=False)
    return CountingDataset(
        name="voc",
        root=year_root,
        samples=samples,
        roi_mask=None,
        class_names=list(VOC_CLASSES),
        split=spec.text,
    )


def count_objects(xml_path: Path, include_difficult: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(20,) class counts, (k, 2) box centres and (k,) class indices of the counted objects."""
    try:
        annotation = ElementTree.parse(xml_path).getroot()
    except FileNotFoundError:
        raise DatasetError(f"{xml_path}: file not found") from None
    except IsADirectoryError:
        raise DatasetError(f"{xml_path}: is a folder, not an annotation file") from None
    except PermissionError:
        raise DatasetError(f"{xml_path}: permission denied") from None
    except OSError as error:
        raise DatasetError(f"{xml_path}: cannot read the annotation ({error.strerror or error})") from None
    except ElementTree.ParseError as error:
        raise DatasetError(f"{xml_path}: not valid XML ({error})") from None
    labels, centres = [], []
    for number, obj in enumerate(annotation.iter("object"), start=1):
        name = (obj.findtext("name") or "").strip()
        if name not in _CLASS_INDEX:
            raise DatasetError(f"{xml_path}: object {number} has unknown class '{name}' (not a VOC class)")
        if _flag(obj, "difficult", xml_path, number) and not include_difficult:
            continue
        labels.append(_CLASS_INDEX[name])
        centres.append(_box_centre(obj, xml_path, number))
    labels_array = np.array(labels, dtype=int)
    counts = np.bincount(labels_array, minlength=len(VOC_CLASSES)).astype(float)
    return counts, np.array(centres, dtype=float).reshape(-1, 2), labels_array


def _year_root(root: Path) -> Path:
    for candidate in (root, root / "VOC2007", root / "VOCdevkit" / "VOC2007"):
        if (candidate / "Annotations").is_dir():
            return candidate
    raise DatasetError(f"{root}: no Annotations/ folder here nor in VOC2007/ (expected VOCdevkit or VOCdevkit/VOC2007)")


def _image_sets(year_root: Path) -> dict[str, str]:
    listed: dict[str, str] = {}
    for set_name, part in IMAGE_SETS.items():
        path = year_root / "ImageSets" / "Main" / f"{set_name}.txt"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise DatasetError(f"{path}: not UTF-8 text (byte {error.start}); expected one image id per line") from None
        except OSError as error:
            raise DatasetError(f"{path}: cannot read the image list ({error.strerror or error})") from None
        for line_number, line in enumerate(text.splitlines(), start=1):
            image_id = line.strip()
            if not image_id:
                continue
            if "\0" in image_id:  # no file name holds one: the OS refuses it in a path
                raise DatasetError(f"{path}: line {line_number}: holds a NUL byte; expected one image id per line")
            if image_id in listed:
                raise DatasetError(
                    f"{path}: line {line_number}: image {image_id} is also in the {listed[image_id]} list"
                )
            listed[image_id] = part
    return listed


def _annotation(year_root: Path, image_id: str, part: str | None, position: int, include_difficult: bool) -> Annotated:
    counts, centres, labels = count_objects(year_root / "Annotations" / f"{image_id}.xml", include_difficult)
    return Annotated(
        index=int(image_id) if image_id.isdigit() else position,
        path=year_root / "JPEGImages" / f"{image_id}.jpg",
        count=counts,
        standard_split=part,
        dots=centres,
        dot_labels=labels,
    )


def _flag(obj: ElementTree.Element, field: str, xml_path: Path, number: int) -> bool:
    """A VOC 0/1 field of an object (absent: 0). Anything else is an error naming it: read as
    "not 1" in silence, a ``difficult`` of 'yes' would count an object the ground truth leaves out."""
    text = obj.findtext(field)
    if text is None or text.strip() in ("", "0"):
        return False
    if text.strip() == "1":
        return True
    raise DatasetError(f"{xml_path}: object {number}'s {field} is {text.strip()[:40]!r}, not 0 or 1")


def _box_centre(obj: ElementTree.Element, xml_path: Path, number: int) -> tuple[float, float]:
    box = obj.find("bndbox")
    if box is None:
        raise DatasetError(f"{xml_path}: object {number} has no bndbox")
    coordinates = []
    for tag in ("xmin", "ymin", "xmax", "ymax"):
        text = box.findtext(tag)
        if text is None:
            raise DatasetError(f"{xml_path}: object {number}'s bndbox has no {tag}")
        try:
            coordinates.append(float(text))
        except ValueError:
            raise DatasetError(
                f"{xml_path}: object {number}'s bndbox {tag} is {text.strip()[:40]!r}, not a number"
            ) from None
    xmin, ymin, xmax, ymax = coordinates
    if not all(math.isfinite(value) for value in (xmin, ymin, xmax, ymax)):
        raise DatasetError(f"{xml_path}: object {number} has a bndbox with NaN or infinite coordinates")
    return (xmin + xmax) / 2.0, (ymin + ymax) / 2.0
