"""Split strings: which samples are train and which are test.

Syntax (one of):
  ``standard``                    each dataset's published split
  ``train=A-B,test=C-D``          1-based inclusive ranges of frame / image numbers; a part may
                                  join several ranges with ``+`` (``test=1-600+1401-2000``) and
                                  either part may be left out; numbers in neither part are dropped
  ``random:FRACTION[:SEED]``      a random FRACTION (0 < FRACTION < 1) of the samples is test,
                                  drawn with SEED (default 0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import train_test_split

from counting.core.errors import DatasetError

SPLITS: tuple[str, str] = ("train", "test")
SPLIT_SYNTAX = "use 'standard', 'train=A-B,test=C-D' (1-based inclusive, '+' joins ranges) or 'random:FRACTION[:SEED]'"

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class SplitSpec:
    """A parsed split string."""

    kind: str  # "standard" | "ranges" | "random"
    ranges: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    fraction: float = 0.0
    seed: int = 0
    text: str = "standard"

    def range_labels(self, indices: np.ndarray) -> np.ndarray:
        """'train' / 'test' / '' (not requested) for each frame number, for a ``ranges`` spec."""
        labels = np.full(len(indices), "", dtype=object)
        for split, ranges in self.ranges.items():
            for low, high in ranges:
                labels[(indices >= low) & (indices <= high)] = split
        return labels


def parse_split(text: str) -> SplitSpec:
    """Parse a split string; anything else raises DatasetError explaining the syntax."""
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"split {text!r}: empty split; {SPLIT_SYNTAX}")
    cleaned = text.strip()
    if cleaned == "standard":
        return SplitSpec(kind="standard", text=cleaned)
    if cleaned.startswith("random"):
        return _parse_random(cleaned)
    if "=" in cleaned:
        return _parse_ranges(cleaned)
    raise DatasetError(f"split {text!r}: unknown split; {SPLIT_SYNTAX}")


def random_labels(n: int, fraction: float, seed: int) -> np.ndarray:
    """'train' / 'test' labels with ``round(fraction * n)`` test samples, reproducible by seed."""
    labels = np.full(n, "train", dtype=object)
    if n < 2:
        raise DatasetError(f"split random:{fraction}: needs at least 2 samples, found {n}")
    _, test_rows = train_test_split(np.arange(n), test_size=fraction, random_state=seed)
    labels[test_rows] = "test"
    return labels


def _parse_random(text: str) -> SplitSpec:
    parts = text.split(":")
    if parts[0] != "random" or len(parts) not in (2, 3):
        raise DatasetError(f"split {text!r}: expected 'random:FRACTION[:SEED]'; {SPLIT_SYNTAX}")
    try:
        fraction = float(parts[1])
        seed = int(parts[2]) if len(parts) == 3 else 0
    except ValueError:
        raise DatasetError(f"split {text!r}: FRACTION must be a number and SEED an integer; {SPLIT_SYNTAX}") from None
    if not 0.0 < fraction < 1.0:
        raise DatasetError(f"split {text!r}: FRACTION must lie strictly between 0 and 1")
    if not 0 <= seed <= MAX_SEED:
        # NumPy's RandomState (scikit-learn's train_test_split) takes seeds below 2**32 only.
        raise DatasetError(f"split {text!r}: SEED must be an integer from 0 to {MAX_SEED}")
    return SplitSpec(kind="random", fraction=fraction, seed=seed, text=text)


def _parse_ranges(text: str) -> SplitSpec:
    ranges: dict[str, tuple[tuple[int, int], ...]] = {}
    for part in text.split(","):
        name, sep, spans = part.partition("=")
        name = name.strip()
        if not sep or name not in SPLITS:
            raise DatasetError(f"split {text!r}: '{part.strip()}' is not 'train=…' or 'test=…'; {SPLIT_SYNTAX}")
        if name in ranges:
            raise DatasetError(f"split {text!r}: '{name}' is given twice")
        ranges[name] = tuple(_parse_span(text, span) for span in spans.split("+"))
    flat = sorted((low, high, name) for name, spans in ranges.items() for low, high in spans)
    for (low_a, high_a, name_a), (low_b, high_b, name_b) in zip(flat, flat[1:], strict=False):
        if low_b <= high_a:
            raise DatasetError(
                f"split {text!r}: ranges {low_a}-{high_a} ({name_a}) and {low_b}-{high_b} ({name_b}) overlap"
            )
    return SplitSpec(kind="ranges", ranges=ranges, text=text)


def _parse_span(text: str, span: str) -> tuple[int, int]:
    match = _RANGE.match(span)
    if not match:
        raise DatasetError(f"split {text!r}: '{span.strip()}' is not a range A-B; {SPLIT_SYNTAX}")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) else low
    if low < 1 or high < low:
        raise DatasetError(f"split {text!r}: range {low}-{high} must satisfy 1 <= A <= B")
    return low, high


def cv_folds(
    indices: np.ndarray, n_folds: int, contiguous: bool, seed: int, block: int | None = None
) -> list[np.ndarray]:
    """Positions of each cross-validation fold.

    Sequences (``contiguous``): runs of ``block`` consecutive frames dealt to the folds in turn
    (``block=None``: one run per fold), so a frame's near-identical neighbours are mostly in the
    same fold instead of the fitted part. Otherwise a seeded random partition.
    """
    n = len(indices)
    if n < 2 * n_folds:
        raise DatasetError(f"train split: {n} samples are too few for {n_folds}-fold calibration")
    if not contiguous:
        return [np.sort(fold) for fold in np.array_split(np.random.default_rng(seed).permutation(n), n_folds)]
    order = np.argsort(indices, kind="stable")
    if block is None:
        return [np.sort(fold) for fold in np.array_split(order, n_folds)]
    # Fewer than n_folds runs of `block` frames would leave folds empty (12 frames: 10, 2, 0, 0, 0).
    block = min(block, max(1, n // n_folds))
    fold_of = (np.arange(n) // block) % n_folds
    return [np.sort(order[fold_of == k]) for k in range(n_folds)]
