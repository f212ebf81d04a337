"""The Method type and the registry of profiling methods (each method module registers one with @register_method)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from np_optimizer.profiler.request import MethodOutput, ProfileRequest
from np_optimizer.registry import Registry

__all__ = ["Method", "METHODS", "register_method"]


@dataclass(frozen=True)
class Method:
    name: str
    cacheable: bool
    profile: Callable[[ProfileRequest], MethodOutput]


# Unknown names fail with NP-PRF-400 (exit 3), as before the registry was generic.
METHODS: Registry[Method] = Registry("profiling method", package="np_optimizer.profiler.methods", code="NP-PRF-400")


def register_method(name: str, *, cacheable: bool) -> Callable[[Callable[[ProfileRequest], MethodOutput]], Method]:
    def register(function: Callable[[ProfileRequest], MethodOutput]) -> Method:
        return METHODS.register(name, Method(name, cacheable, function))

    return register
