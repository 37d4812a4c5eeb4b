"""Stage 6, figures: evaluation, comparison with peers and published rows, reports and plots.

The public surface (``__all__``) is imported from its modules on first use (:mod:`counting.core.lazy`).
The accuracy studies' library (``comparison/study.py``) is named here with the word ``study`` in
the names that would say little on their own.
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

_EXPORTS = {
    "evaluate_model": ".evaluation",
    "plot_loss": ".plots",
    "write_report": ".report",
    "load_published": ".published",
    # peers
    "build_exact_gp": ".peers.regression",
    "build_ridge": ".peers.regression",
    # every method on the same descriptors and split
    "ComparisonData": ".comparison",
    "holdout": ".comparison",
    "run_feature_method": ".comparison",
    # settings chosen on a validation hold-out (the accuracy scripts)
    "Candidate": ".comparison.study",
    "Study": ".comparison.study",
    "choose_window": ".comparison.study",
    "final_study_figures": ".comparison.study:final",
    "print_study_row": ".comparison.study:print_row",
    "select_candidate": ".comparison.study:select",
    "size_text": ".comparison.study",
    "study_intervals": ".comparison.study:intervals",
    "write_study": ".comparison.study",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
