"""Flip-averaged descriptors: the mean of a photo's descriptor and its left-right mirror's.

A whole-frame descriptor should not depend on which way the photo faces; averaging the two views
removes that noise at twice the extraction cost. Each view is extracted (and cached) on its own,
the mirror under its own cache key (``Preprocessing.flip`` is part of the fingerprint). Whole
frames only: a mirrored grid would also mirror the cell order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from counting.features.extract import FeatureSet, extract_features


def flip_averaging(extract: Callable[..., FeatureSet] | None = None) -> Callable[..., FeatureSet]:
    """An extractor with ``extract_features``' signature returning flip-averaged descriptors."""
    inner = extract if extract is not None else extract_features

    def averaged(paths: Sequence[Any], backbone: Any, prep: Any = None, grid: Any = None, **options: Any) -> FeatureSet:
        if grid is not None:
            raise ValueError("flip-averaged descriptors are whole-frame only (no grid)")
        if prep is None:
            from counting.features.backbones import Preprocessing

            prep = Preprocessing()
        plain = inner(paths, backbone, prep, grid=None, **options)
        mirrored = inner(paths, backbone, dataclasses.replace(prep, flip=not prep.flip), grid=None, **options)
        return FeatureSet(
            features=(plain.features + mirrored.features) / 2,
            ok=plain.ok & mirrored.ok,
            errors=plain.errors | mirrored.errors,
            paths=plain.paths,
            n_cached=plain.n_cached + mirrored.n_cached,
            n_computed=plain.n_computed + mirrored.n_computed,
        )

    return averaged
