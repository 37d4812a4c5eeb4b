"""The familiarity score of a model trained on several datasets (e.g. models/crowd.npz).

The score is fitted on all their train pictures together, each dataset cut into its own
contiguous calibration runs (counting.heads.familiarity, ``groups=``); only the model's
familiarity section changes (its counts are unchanged). One dataset: ``counting familiarize``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from counting.heads.familiarity import FLAG_RATE, Familiarity
from counting.model.counting_model import CountingModel
from counting.train.familiarity import add_familiarity

__all__ = ["DatasetPart", "familiarize_on_several"]


@dataclass(frozen=True)
class DatasetPart:
    """A dataset reader, its folder and the split the model was trained with (its train part is used)."""

    name: str
    root: Path
    split: str

    def spec(self) -> str:
        """``NAME:ROOT:SPLIT``, as the model file records it."""
        return f"{self.name}:{self.root}:{self.split}"


def familiarize_on_several(
    model: CountingModel,
    parts: Sequence[DatasetPart],
    *,
    cache: Any = None,
    flag_rate: float = FLAG_RATE,
    log: Callable[[str], None] | None = None,
) -> Familiarity:
    """Fit ``model.familiarity`` on the train pictures of every part in ``parts``, and return it."""
    from counting.data import load_dataset

    paths: list[str] = []
    order: list[int] = []
    groups: list[str] = []
    for part in parts:
        samples = load_dataset(part.name, part.root, split=part.split).subset("train").samples
        paths += [str(sample.path) for sample in samples]
        order += [sample.index for sample in samples]
        groups += [f"{part.name}:{part.root}"] * len(samples)
        if log is not None:
            log(f"{part.spec()}: {len(samples)} train pictures")
    return add_familiarity(
        model,
        paths,
        order=order,
        groups=groups,
        cache=cache,
        flag_rate=flag_rate,
        trained_on=" + ".join(part.spec() for part in parts),
    )
