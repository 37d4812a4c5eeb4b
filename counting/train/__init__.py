"""Stage 5, a dataset -> a model file: the training pipeline, the general crowd model, the
familiarity section.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".pipeline": "TrainingConfig make_regressor train_model",
        ".fitting": "agp_counts conv_ensemble_counts fit_agp",
        ".familiarity": "add_familiarity",
        ".several_sets": "DatasetPart familiarize_on_several",
        ".zero_floor": "ZeroFloor calibrate_zero_floor without_floor zero_width_routes",
        ".recipe": "Recipe RecipeData read_recipe shared_data_root",
        ".recipe_steps": "run_crowd_recipe",
        # the crowd network (issue 48, docs/network.md)
        ".network.crops": "INPUT_SIZE TrainingPictures",
        ".network.training": "NetworkSettings averaged_network checkpoint_state load_network save_network train_network",
        ".network.validation": "count_pictures crowd_parts validation_figures",
        ".class_intervals": "OutOfFoldCounts out_of_fold_counts recalibrate_class_intervals",
        ".crowd": (
            "CrowdSettings GateInputs GateOutOfFold add_specialists crowd_figures fit_crowd_gate gate_inputs "
            "head_validation_samples read_gate_out_of_fold read_out_of_fold train_crowd_model "
            "write_gate_out_of_fold write_out_of_fold"
        ),
    },
)
