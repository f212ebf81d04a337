"""Profiling methods by name. A method is a module-level function `profile(request) -> MethodOutput`, registered
with @register_method (base.py) in a module of this package, which package discovery finds; `cacheable` says whether
its results may be reused (estimates yes, measurements never)."""

from __future__ import annotations

from np_optimizer.profiler.methods.base import METHODS, Method, register_method

__all__ = ["Method", "register_method", "get_method", "registered_methods"]


def registered_methods() -> tuple[str, ...]:
    """The names of every registered method (the catalogue's METHODS must be these)."""
    return METHODS.names()


def get_method(name: str) -> Method:
    """The registered method `name`, or an UnsupportedError (NP-PRF-400) listing the registered ones."""
    return METHODS.get(name)
