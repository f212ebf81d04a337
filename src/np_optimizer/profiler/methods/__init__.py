"""Profiling methods by name. A method is a module-level function `profile(request) -> MethodOutput`, registered
with @register_method; `cacheable` says whether its results may be reused (estimates yes, measurements never)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from np_optimizer.errors import UnsupportedError
from np_optimizer.profiler.request import MethodOutput, ProfileRequest

__all__ = ["Method", "register_method", "get_method", "registered_methods"]


@dataclass(frozen=True)
class Method:
    name: str
    cacheable: bool
    profile: Callable[[ProfileRequest], MethodOutput]


_METHODS: dict[str, Method] = {}


def register_method(name: str, *, cacheable: bool) -> Callable[[Callable[[ProfileRequest], MethodOutput]], Method]:
    def register(function: Callable[[ProfileRequest], MethodOutput]) -> Method:
        method = Method(name, cacheable, function)
        _METHODS[name] = method
        return method

    return register


def _load() -> None:
    from np_optimizer.profiler.methods import mlia, on_device  # noqa: F401  importing registers them


def registered_methods() -> tuple[str, ...]:
    """The names of every registered method (the catalogue's METHODS must be these)."""
    _load()
    return tuple(_METHODS)


def get_method(name: str) -> Method:
    _load()

    method = _METHODS.get(name)
    if method is None:
        raise UnsupportedError(f"Unknown profiling method '{name}'.", hint=f"Methods: {', '.join(_METHODS)}.",
                               code="NP-PRF-400")
    return method
