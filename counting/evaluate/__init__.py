"""Stage 6, figures: evaluation, comparison with peers and published rows, reports and plots."""
