"""Stage 3, descriptors or maps -> counts: the density heads, the per-class transform,
calibrated intervals, the familiarity score.

Besides what a user needs, the public surface (``__all__``, :mod:`counting.core.lazy`) names
the parts of the density heads that the studies in ``scripts/`` run one by one (docs/density.md,
docs/voc.md).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".uncertainty": "ConformalInterval fit_class_group_interval group_coverage miss_floor",
        ".familiarity": "fit_familiarity map_statistics",
        ".crowd.sparse_gate": (
            "BY_BOTH HEAD_LIMIT_FACTOR SparseGate WEIGHT_FLOOR fit_sparse_gate gate_features per_photo photos_in routes"
        ),
        # per-class counts (VOC)
        ".multiclass": "PerClassRegressor TransformedRegressor apply_gate choose_gate",
        # density heads on frozen feature maps
        ".density": "DensityHead extract_maps fit_density_head",
        ".density.maps": "layer_channels maps_on_grid",
        ".crowd.routing": "SetRouter fit_set_router",
        ".density.ridge.fitting": "COUNT_WEIGHTS",
        ".density.data": "TargetSettings density_targets",
        ".crowd.people_mask": "PeopleMask cell_labels fit_people_mask mask_cells",
        # the conv density head, its ensemble and the AGP's correction of the ensemble's sum
        ".density.conv.fitting": "ConvSettings fit_conv_heads stride8_maps",
        ".density.conv.head": "ensemble",
        # the trained crowd network (issue 48) as a density head on the backbone's block4 tap
        ".density.network.head": "NetworkDensityHead",
        ".density.network.module": "LOWER_TAP CrowdNetwork",
        ".density.conv.training": (
            "CONV_LAYERS CORRECTION_WEIGHT DEFAULT_CONV_SETTINGS=DEFAULT_SETTINGS "
            "corrected_counts correction_targets validation_parts"
        ),
        # the per-class density head (VOC)
        ".density.classes.training": "DEFAULT_CLASS_LAYERS DEFAULT_SPREAD fit_class_head_descriptors",
        ".density.classes.head": (
            "accumulate_grams annotation_path class_density_targets class_head_features extract_class_maps read_boxes"
        ),
    },
)
