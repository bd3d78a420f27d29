"""Lazy package exports (PEP 562): ``import privcore.X`` stays light, each name is imported on use.

One mechanism for every package's public interface (the shape of scientific-python's
``lazy_loader.attach``)::

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"name": "submodule", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """(``__getattr__``, ``__dir__``, ``__all__``) for ``package``, whose public ``name`` lives in
    ``package.<exports[name]>``."""
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__, sorted(table)
