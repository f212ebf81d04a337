"""The Method type and the registry of profiling methods (each method module registers one with @register_method)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from np_optimizer.profiler.request import MethodOutput, ProfileRequest
from np_optimizer.registry import Registry

__all__ = ["Method", "METHODS", "register_method"]


def _always_layer_costs(_result: dict[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class Method:
    name: str
    cacheable: bool
    profile: Callable[[ProfileRequest], MethodOutput]
    # a stored round of this method -> why it has no per-layer costs (None: it has them), for the layer views
    no_layer_costs: Callable[[dict[str, Any]], str | None] = _always_layer_costs


# Unknown names fail with NP-PRF-400 (exit 3), as before the registry was generic.
METHODS: Registry[Method] = Registry("profiling method", package="np_optimizer.profiler.methods", code="NP-PRF-400")


def register_method(name: str, *, cacheable: bool,
                    no_layer_costs: Callable[[dict[str, Any]], str | None] = _always_layer_costs,
                    ) -> Callable[[Callable[[ProfileRequest], MethodOutput]], Method]:
    def register(function: Callable[[ProfileRequest], MethodOutput]) -> Method:
        return METHODS.register(name, Method(name, cacheable, function, no_layer_costs))

    return register
