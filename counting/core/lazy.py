"""Lazy package surfaces: a package names its public objects in ``__all__`` and imports each one
from its module only on first use.

A stage's ``__init__`` re-exports what scripts and users need (``from counting.heads import
fit_conv_heads``) without importing it: an eager import would pull torch, scikit-learn or Dask
into every ``import counting.<stage>.<module>`` (the package's ``__init__`` runs first) and slow
``counting --help`` (scripts/bench_cli_startup.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``. ``exports`` maps a public name to where it is
    defined, relative to the package: ``".datasets"`` (the same name in that module),
    ``".density.conv_training:DEFAULT_SETTINGS"`` (another name there: the surface renames it) or
    ``".defaults:"`` (the module itself). The first lookup stores the object in the package, so
    later ones are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = where.partition(":")
        module = importlib.import_module(module_name, package)
        value = getattr(module, attribute or name) if attribute or ":" not in where else module
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
