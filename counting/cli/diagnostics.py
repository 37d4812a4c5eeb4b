"""The stderr console and its warning line: the lowest piece of the CLI.

Both ``common`` (every command's shared pieces) and ``options`` (the option declarations, whose
callbacks warn about an old spelling) print warnings here. It imports nothing of the CLI, so
``options`` needs no import of ``common``, which reads ``option_groups``, which reads ``options``
(that was an import cycle).
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.markup import escape

# A $COLUMNS that is not a positive whole number: rich would print nothing at all at 0 (every
# table and error line lost, the exit status unchanged) and fail to start at a digit like "²".
# Set aside here, before the first console of the CLI (this one, then common's stdout) reads it.
_columns = os.environ.get("COLUMNS")
if _columns is not None and not (_columns.isdecimal() and int(_columns) > 0):
    del os.environ["COLUMNS"]

# Diagnostics are soft-wrapped: a line is one line in a log file, which rich would otherwise break
# at 80 columns when stderr is not a terminal; a terminal still folds a long line on screen.
# No :emoji: codes, so a file named "a:smile:.jpg" shows as named.
error_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def print_warning(line: str) -> None:
    """One yellow line for a warning (PIL, torch, NumPy or ours), never a multi-line dump."""
    error_console.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
