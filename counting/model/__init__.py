"""Stage 4, the model file: its schema and CountingModel (a fitted head plus everything needed
to apply it).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".counting_model": "CountingModel load_model",
        ".default_path": "default_model_path",
    },
)
