"""PEP 562 re-exports: a package says in which of its modules each public name lives, and that module is imported
on the name's first use (so `import np_optimizer.records` loads no record module until one is read)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's module-level `__getattr__`: `name` from `package.<where[name]>`, then kept on the package so
    later look-ups skip it; a name it does not list is an AttributeError, as Python's own."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
