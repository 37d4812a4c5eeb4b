"""What a features file was made with: a small JSON record beside the ``.npy`` or ``.csv``.

A ``.npy`` holds numbers and nothing else, so ``count --features`` could not tell a file made
at another input size, without the model's ROI mask or without its flip-averaging from the
model's own reading of the pictures: it counted them, some people off, without a word (Mall
frames counted 4-7 people more). ``counting features -o mall.npy`` writes ``mall.features.json``
beside it; ``count --features`` compares it with the model's settings and refuses, in one line,
a file made with other ones (cli/count.py).

The record names every setting that changes a row and cannot be seen in the array's shape:
backbone and its weights, input size, ROI mask (its SHA-256, the mask itself stays in the
model), grid and layout, descriptor kind, flip-averaging; and, for rows a model's head made
(``counting features -m``), that head's kind and the model file they belong to.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from counting.core.errors import CountingError

# Bump when a field's meaning changes: an older record is then read as "made by another version".
RECORD_VERSION = 1
RECORD_SUFFIX = ".features.json"
# Rows that are descriptors of the pictures (any model of the same settings reads them); rows a
# head made (a density head's region sums) belong to the one model file that made them.
DESCRIPTOR_ROWS = "descriptors"


@dataclass(frozen=True)
class FeaturesRecord:
    """The settings a features file's rows were made with."""

    backbone: str
    weights_sha256: str | None
    input_size: int | None
    roi_sha256: str | None  # None: no ROI mask, the whole picture
    grid: tuple[int, int] | None
    layout: str
    descriptor: str
    flip_average: bool
    rows: str = DESCRIPTOR_ROWS  # or the head kind whose rows these are ("density", ...)
    model_sha256: str | None = None  # the model file whose head made the rows (rows != descriptors)
    n_rows: int | None = None

    def document(self) -> dict[str, Any]:
        record = asdict(self)
        record["grid"] = None if self.grid is None else list(self.grid)
        return {"format": "counting features record", "version": RECORD_VERSION, **record}


def record_path(features_file: str | Path) -> Path:
    """``mall.npy`` -> ``mall.features.json`` (beside it)."""
    return Path(features_file).with_suffix(RECORD_SUFFIX)


def roi_sha256(mask: np.ndarray | None) -> str | None:
    """A mask's fingerprint: its shape and its on/off pixels (None for no mask)."""
    if mask is None:
        return None
    on = np.ascontiguousarray(np.asarray(mask) > 0)
    return hashlib.sha256(f"{on.shape}".encode() + np.packbits(on).tobytes()).hexdigest()


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_record(features_file: str | Path, record: FeaturesRecord) -> Path:
    """Write ``record`` beside ``features_file`` (atomically); returns its path."""
    from counting.core.files import atomic_write_text

    path = record_path(features_file)
    atomic_write_text(path, json.dumps(record.document(), indent=2) + "\n")
    return path


def read_record(features_file: str | Path) -> FeaturesRecord | None:
    """The record beside ``features_file``; None when there is none (a file made before records,
    or by another program). A record that cannot be read is one line naming it."""
    path = record_path(features_file)
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or document.get("format") != "counting features record":
            raise ValueError("not a features record")
        if document.get("version") != RECORD_VERSION:
            raise ValueError(f"record version {document.get('version')!r}, this version reads {RECORD_VERSION}")
        known = {item.name for item in fields(FeaturesRecord)}
        values = {key: value for key, value in document.items() if key in known}
        if values.get("grid") is not None:
            values["grid"] = tuple(int(side) for side in values["grid"])
        return FeaturesRecord(**values)
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as error:
        raise CountingError(f"{path}: not a readable features record ({str(error).splitlines()[0]})") from None


def _grid_text(grid: tuple[int, int] | None) -> str:
    return "whole frames" if grid is None else f"a {grid[0]}x{grid[1]} grid"


def _size_text(size: int | None) -> str:
    return "pictures at their own size" if size is None else f"input short side {size} px"


def first_difference(made: FeaturesRecord, wanted: FeaturesRecord) -> str | None:
    """The first setting the file was made with that the model does not read with, in words
    (``"ROI off, the model reads inside its ROI mask"``), or None when the rows are the model's."""
    if made.rows != wanted.rows:
        return f"its rows are {made.rows} rows, the model reads {wanted.rows} rows"
    if made.rows != DESCRIPTOR_ROWS and made.model_sha256 != wanted.model_sha256:
        return f"its {made.rows} rows were made by another model file"
    if made.backbone != wanted.backbone:
        return f"backbone {made.backbone}, the model reads {wanted.backbone}"
    if made.weights_sha256 and wanted.weights_sha256 and made.weights_sha256 != wanted.weights_sha256:
        return f"{made.backbone} weights {made.weights_sha256[:12]}, the model's are {wanted.weights_sha256[:12]}"
    if made.descriptor != wanted.descriptor:
        return f"descriptor {made.descriptor}, the model reads {wanted.descriptor}"
    if made.input_size != wanted.input_size:
        return f"{_size_text(made.input_size)}, the model reads {_size_text(wanted.input_size)}"
    if made.roi_sha256 != wanted.roi_sha256:
        if wanted.roi_sha256 is None:
            return "an ROI mask, the model reads whole pictures"
        if made.roi_sha256 is None:
            return "ROI off (whole pictures), the model reads inside its ROI mask"
        return "another ROI mask than the model's"
    if made.grid != wanted.grid:
        return f"{_grid_text(made.grid)}, the model reads {_grid_text(wanted.grid)}"
    if made.layout != wanted.layout:
        return f"layout {made.layout}, the model's is {wanted.layout}"
    if made.flip_average != wanted.flip_average:
        made_flip = "flip-averaged" if made.flip_average else "not flip-averaged"
        wanted_flip = "flip-averaged" if wanted.flip_average else "single"
        return f"{made_flip} descriptors, the model reads {wanted_flip} ones"
    return None
