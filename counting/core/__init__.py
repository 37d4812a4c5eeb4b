"""Shared foundations every stage uses: one-line errors, safe file output, signals, defaults,
column names, figures of merit.

The public surface (``__all__``) names what scripts and users need; each is imported from its
module on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".defaults": "defaults",
        ".errors": "CountingError",
        ".metrics": "crowd_metrics voc_metrics",
        ".files": "atomic_write check_outputs",
        ".version": "__version__",
    },
)
