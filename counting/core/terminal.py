"""Whether a console writes to a terminal: the question a progress bar asks before it shows."""

from __future__ import annotations

from typing import Any


def on_terminal(console: Any) -> bool:
    """True when ``console`` (a rich Console) writes to a terminal. Its file is asked, not rich's
    ``is_terminal``: FORCE_COLOR=1 (or TTY_COMPATIBLE=1) asks rich for colours in a pipe or a log,
    and rich then calls the pipe a terminal, so a progress bar redrew itself into the log."""
    isatty = getattr(getattr(console, "file", None), "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False
