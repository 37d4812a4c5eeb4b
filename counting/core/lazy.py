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


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``.

    ``exports`` maps a module, relative to the package (``".datasets"``), to the names it gives,
    separated by spaces: ``"load_dataset parse_split"``. ``"NEW=OLD"`` exports the module's ``OLD``
    as ``NEW`` (a name that says little at the package's level); a name that is the module's own
    and not one of its attributes (``".defaults": "defaults"``) is the module itself. The first
    lookup stores the object in the package, so later ones are plain attribute reads.
    """
    where: dict[str, tuple[str, str]] = {}
    for module_name, names in exports.items():
        for entry in names.split():
            public, _, attribute = entry.partition("=")
            if public in where:
                raise ValueError(f"{package}: {public} exported twice")
            where[public] = (module_name, attribute or public)

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = where[name]
        module = importlib.import_module(module_name, package)
        own_module = module_name.rsplit(".", 1)[-1] == attribute and not hasattr(module, attribute)
        value = module if own_module else getattr(module, attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__, sorted(where)
