"""Stage 5, a dataset -> a model file: the training pipeline, the general crowd model, the
familiarity section.

The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "TrainingConfig": ".pipeline",
    "make_regressor": ".pipeline",
    "train_model": ".pipeline",
    "agp_counts": ".fitting",
    "conv_ensemble_counts": ".fitting",
    "fit_agp": ".fitting",
    "add_familiarity": ".familiarity",
    "CrowdSettings": ".crowd",
    "crowd_figures": ".crowd",
    "train_crowd_model": ".crowd",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
