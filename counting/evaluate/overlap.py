"""Which test pictures a model was trained on: a figure on them is not a held-out figure.

A model file records the dataset, root and split it was trained on (``model.dataset``); reading
that split again gives its train pictures, and a test picture is one of them when it is the same
file (links resolved) or the same bytes (a copy of the dataset in another folder). `compare`
refuses such a model's row; `evaluate` and `report` keep their figures but say so beside them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TrainingOverlap", "UnknownTraining", "pictures_in_training", "training_overlap"]


class UnknownTraining(Exception):
    """Which pictures the model was trained on cannot be told (the message says why)."""


@dataclass(frozen=True)
class TrainingOverlap:
    """Of a list of test pictures, which ones the model was trained on."""

    in_training: tuple[bool, ...]  # one per test picture
    split: str | None = None  # the split the model records it was trained on
    unknown: str | None = None  # why it cannot be told (then ``in_training`` is all False)

    @property
    def count(self) -> int:
        return sum(self.in_training)

    @property
    def held_out(self) -> bool | None:
        """True when no test picture was trained on; None when that cannot be told."""
        return None if self.unknown is not None else self.count == 0

    def kept(self, keep: Sequence[bool]) -> TrainingOverlap:
        """The same overlap over the pictures ``keep`` marks (those that could be counted)."""
        flags = tuple(flag for flag, ok in zip(self.in_training, keep) if ok)
        return TrainingOverlap(flags, self.split, self.unknown)

    def note(self, noun: str = "test pictures") -> str | None:
        """One line for a figure's caption and stderr; None when the figures are held-out."""
        if self.unknown is not None:
            return f"cannot tell which pictures the model was trained on ({self.unknown}): maybe not a held-out figure"
        if not self.count:
            return None
        return (
            f"trained on {self.count} of the {len(self.in_training)} {noun} (split {self.split!r}): "
            "not a held-out figure"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON fields: ``trained_on_test`` (None when unknown) and the note."""
        return {
            "trained_on_test": None if self.unknown is not None else self.count,
            "held_out": self.held_out,
            "overlap_note": self.note(),
        }


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _same_images(train_paths: Sequence[Path], test_paths: Sequence[Path]) -> list[bool]:
    """Per test picture, whether it is a train picture: the same file (links resolved) or the
    same bytes. Only pictures of a train picture's size are hashed (a size differs for most)."""
    resolved = {Path(path).resolve() for path in train_paths}
    sizes: dict[int, list[Path]] = {}
    for path in resolved:
        try:
            sizes.setdefault(path.stat().st_size, []).append(path)
        except OSError:
            continue
    digests: dict[int, set[str | None]] = {}
    flags = []
    for path in test_paths:
        path = Path(path).resolve()
        if path in resolved:
            flags.append(True)
            continue
        try:
            size = path.stat().st_size
        except OSError:
            flags.append(False)
            continue
        if size not in sizes:
            flags.append(False)
            continue
        if size not in digests:
            digests[size] = {_digest(item) for item in sizes[size]} - {None}
        flags.append(_digest(path) in digests[size])
    return flags


def _folder(text: Any) -> Path | None:
    """The recorded root when it is a folder here."""
    if not isinstance(text, str) or not text:
        return None
    try:
        folder = Path(text).expanduser()
        return folder.resolve() if folder.is_dir() else None
    except (OSError, ValueError):
        return None


def _train_part(name: str, root: Path, split: str) -> Any:
    """The train part of dataset ``name`` at ``root`` under ``split``; the general crowd model's
    dataset (four sets in one, fixed validation parts) is read by its own reader, which no command
    takes as --dataset."""
    from counting.data.datasets import load_dataset

    if name == "crowd":
        from counting.data.datasets.crowd import read_crowd

        return read_crowd(root, split=split).subset("train")
    return load_dataset(name, root, split=split).subset("train")


def pictures_in_training(model: Any, dataset: str, test_paths: Sequence[Path], root: Path | None = None) -> list[bool]:
    """Per test picture of ``dataset`` (read at ``root``), whether ``model`` was trained on it
    (all False when it was trained on another dataset that is not here); :class:`UnknownTraining`
    when that cannot be told."""
    recorded = model.dataset if isinstance(model.dataset, dict) else {}
    name, split = recorded.get("name"), recorded.get("split")
    trained_root = _folder(recorded.get("root"))
    here = None if root is None else _folder(str(root))
    if name != dataset:
        if trained_root is not None and trained_root == here:
            raise UnknownTraining(f"it records dataset {name!r:.40} at this dataset's root")
        if trained_root is None or not isinstance(name, str) or not isinstance(split, str):
            return [False] * len(test_paths)  # another dataset, not here: none of these pictures
        try:
            trained = _train_part(name, trained_root, split)
        except Exception:  # noqa: BLE001 - another dataset that no longer reads: not these pictures
            return [False] * len(test_paths)
        return _same_images(list(trained.paths), test_paths)
    if not isinstance(split, str) or not split:
        raise UnknownTraining(f"it records no split (found {split!r:.40})")
    folder = trained_root or here  # a model trained elsewhere on the same dataset: its split, read here
    if folder is None:
        raise UnknownTraining("neither its recorded root nor this dataset's root is a folder here")
    try:
        trained = _train_part(dataset, folder, split)
    except Exception as error:  # noqa: BLE001 - any failure: the train pictures are unknown
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UnknownTraining(f"its split {split!r:.60} does not read: {detail[:120]}") from None
    return _same_images(list(trained.paths), test_paths)


def training_overlap(model: Any, dataset: str, test_paths: Sequence[Path], root: Path | None = None) -> TrainingOverlap:
    """:func:`pictures_in_training` as a :class:`TrainingOverlap` (unknown: the reason kept)."""
    recorded = model.dataset if isinstance(model.dataset, dict) else {}
    split = recorded.get("split") if isinstance(recorded.get("split"), str) else None
    try:
        flags = pictures_in_training(model, dataset, test_paths, root)
    except UnknownTraining as unknown:
        return TrainingOverlap((False,) * len(test_paths), split, str(unknown))
    return TrainingOverlap(tuple(flags), split)
