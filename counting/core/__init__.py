"""Shared foundations every stage uses: one-line errors, safe file output, signals, defaults,
column names, figures of merit.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".defaults": "defaults",
        ".errors": "CountingError",
        ".metrics": "crowd_metrics voc_metrics",
        ".files": "atomic_write check_outputs check_writable",
        ".version": "__version__",
    },
)
