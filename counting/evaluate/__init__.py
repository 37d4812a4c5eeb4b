"""Stage 6, figures: evaluation, comparison with peers and published rows, reports and plots.

The accuracy studies' library (``comparison/study.py``) is named here with the word ``study`` in
the names that would say little on their own.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".evaluation": "evaluate_model",
        ".plots": "plot_loss",
        ".report": "write_report",
        ".published": "load_published",
        # peers
        ".peers.regression": "build_exact_gp build_ridge",
        # every method on the same descriptors and split
        ".comparison": "ComparisonData holdout run_feature_method",
        # settings chosen on a validation hold-out (the accuracy scripts)
        ".comparison.study": (
            "Candidate Study choose_window final_study_figures=final print_study_row=print_row "
            "select_candidate=select size_text study_intervals=intervals write_study"
        ),
    },
)
