"""Run every counting method on the same features and split, timing fit and predict.

Feature methods (ridge, exact GP, sparse GP, the paper's AGP variants) share one set of
descriptors and also run on grid tiles (the layouts of ``counting.features.layouts``); the HOG detector
works on the images. Every row is measured here; published figures are set beside them.

- ``data``: a dataset split and its cached whole-frame and tile descriptors; the hold-out.
- ``methods``: fitting and scoring each method on each layout.
- ``output``: the published figures and the CSV / JSON / Markdown files.
"""

from counting.evaluate.comparison.data import ComparisonData, default_split, holdout, load_comparison_data
from counting.evaluate.comparison.methods import (
    DEFAULT_METHODS,
    DEFAULT_TILED_METHODS,
    MethodResult,
    check_methods,
    feature_rows,
    run_comparison,
    run_feature_method,
    run_image_method,
    score,
)
from counting.evaluate.comparison.output import markdown_table, published_rows, table_records, write_comparison

__all__ = [
    "DEFAULT_METHODS",
    "DEFAULT_TILED_METHODS",
    "ComparisonData",
    "MethodResult",
    "check_methods",
    "default_split",
    "feature_rows",
    "holdout",
    "load_comparison_data",
    "markdown_table",
    "published_rows",
    "run_comparison",
    "run_feature_method",
    "run_image_method",
    "score",
    "table_records",
    "write_comparison",
]
