"""Stage 4, the model file: its schema and CountingModel (a fitted head plus everything needed
to apply it).

The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "CountingModel": ".counting_model",
    "default_model_path": ".counting_model",
    "load_model": ".counting_model",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
