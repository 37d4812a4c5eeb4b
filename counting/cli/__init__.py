"""The command line: one typer app (``app.py``), one module per command.

``from counting.cli import main`` runs it (what the ``counting`` entry point calls).
"""

from __future__ import annotations

from counting.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".app": "COMMANDS main",
    },
)
