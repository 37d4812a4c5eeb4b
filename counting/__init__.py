"""counting: count objects and people in images and video with asymmetric-kernel GPs.

``counting.count(images, model=None)`` counts in one call and ``counting.load_model(path)`` loads
a model file (:mod:`counting.apply.api`). They are imported on first use, so ``import counting``
(and ``counting --help``) stays fast.
"""

from __future__ import annotations

from typing import Any

from counting.core.version import __version__

__all__ = ["Counts", "__version__", "count", "load_model"]


def __getattr__(name: str) -> Any:
    if name in ("count", "load_model", "Counts"):
        from counting.apply import api

        return getattr(api, name)
    raise AttributeError(f"module 'counting' has no attribute {name!r}")
