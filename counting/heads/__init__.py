"""Stage 3, descriptors or maps -> counts: the density heads, the per-class transform,
calibrated intervals, the familiarity score.

The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
Besides what a user needs, it names the parts of the density heads that the studies in
``scripts/`` run one by one (docs/density.md, docs/voc.md).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "ConformalInterval": ".uncertainty",
    "fit_familiarity": ".familiarity",
    # per-class counts (VOC)
    "PerClassRegressor": ".multiclass",
    "TransformedRegressor": ".multiclass",
    "apply_gate": ".multiclass",
    "choose_gate": ".multiclass",
    # density heads on frozen feature maps
    "DensityHead": ".density",
    "extract_maps": ".density",
    "fit_density_head": ".density",
    "layer_channels": ".density.maps",
    "COUNT_WEIGHTS": ".density.fitting",
    "TargetSettings": ".density.data",
    "density_targets": ".density.data",
    # the conv density head, its ensemble and the AGP's correction of the ensemble's sum
    "ConvSettings": ".density.conv_fitting",
    "fit_conv_heads": ".density.conv_fitting",
    "stride8_maps": ".density.conv_fitting",
    "ensemble": ".density.conv_head",
    "CONV_LAYERS": ".density.conv_training",
    "CORRECTION_WEIGHT": ".density.conv_training",
    "DEFAULT_CONV_SETTINGS": ".density.conv_training:DEFAULT_SETTINGS",
    "corrected_counts": ".density.conv_training",
    "correction_targets": ".density.conv_training",
    "validation_parts": ".density.conv_training",
    # the per-class density head (VOC)
    "DEFAULT_CLASS_LAYERS": ".density.class_training",
    "DEFAULT_SPREAD": ".density.class_training",
    "fit_class_head_descriptors": ".density.class_training",
    "accumulate_grams": ".density.multiclass",
    "annotation_path": ".density.multiclass",
    "class_density_targets": ".density.multiclass",
    "class_head_features": ".density.multiclass",
    "extract_class_maps": ".density.multiclass",
    "read_boxes": ".density.multiclass",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
