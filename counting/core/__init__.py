"""Shared foundations every stage uses: one-line errors, safe file output, signals, defaults, column names, figures of merit."""
