"""Compiler backends: one registered `Backend` per backend, bundling everything np knows about it.

    xnnpack.py    ExecuTorch's XNNPACK delegate for Arm CPUs
    ethos_u.py    ExecuTorch's Arm backend for Ethos-U NPUs (TOSA, then Vela)

A Backend holds its graph-quantize schemes (each with the quantizer builder), its lowering, whether its programs run
on this machine's ExecuTorch runtime, whether MLIA can estimate them, whether advanced_quantize's schemes lower on it,
and the tool versions that decide its compiled bytes. Device rows (devices/catalog.py) name a backend; validation,
the run.yaml writer, compilation, the profiling methods and the compatibility doc all read these objects. Adding a
backend is one module here (registered with `register_backend` from base.py, found by package discovery) plus
device rows. Nothing here imports torch at import time: the builders and the lowering import it when called.
"""

from __future__ import annotations

from np_optimizer.backends.base import (
    BACKENDS,
    Backend,
    CompileOptions,
    Describe,
    KeepFloat,
    Lowering,
    QuantizerBuilder,
    Scheme,
    register_backend,
)

__all__ = ["BACKENDS", "KeepFloat", "QuantizerBuilder", "Lowering", "Describe", "CompileOptions", "Scheme", "Backend",
           "register_backend", "get_backend", "backends", "all_scheme_names"]


def backends() -> tuple[Backend, ...]:
    """Every registered backend, in discovery order (module names)."""
    return BACKENDS.entries()


def get_backend(name: str) -> Backend:
    """The registered backend `name`, or an UnsupportedError (NP-CFG-422) listing the registered ones."""
    return BACKENDS.get(name)


def all_scheme_names() -> tuple[str, ...]:
    """Every graph-quantize scheme name of any backend (for messages about a name no backend knows)."""
    return tuple(dict.fromkeys(s for b in backends() for s in b.scheme_names))
