"""Where the shipped default model lies: in its own module, without the model's code (torch, the
heads), so a command can check its outputs against it before anything heavy is imported."""

from __future__ import annotations

import sys
from pathlib import Path

from counting.core import defaults


def default_model_path() -> Path:
    """The shipped default model (``defaults.MODEL_FILE``, the general crowd model) under
    ``models/`` in a checkout, or in the installed data files."""
    checkout = Path(__file__).resolve().parents[2] / "models" / defaults.MODEL_FILE
    if checkout.is_file():
        return checkout
    installed = Path(sys.prefix) / "share" / "counting" / "models" / defaults.MODEL_FILE
    return installed if installed.is_file() else checkout
