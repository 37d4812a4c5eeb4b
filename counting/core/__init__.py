"""Shared foundations every stage uses: one-line errors, safe file output, signals, defaults,
column names, figures of merit.

The public surface (``__all__``) names what scripts and users need; each is imported from its
module on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "defaults": ".defaults:",  # the module: default settings of every command
    "CountingError": ".errors",
    "crowd_metrics": ".metrics",
    "voc_metrics": ".metrics",
    "atomic_write": ".files",
    "check_outputs": ".files",
    "__version__": ".version",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
