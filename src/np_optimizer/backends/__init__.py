"""Compiler backends: one registered `Backend` per backend, bundling everything np knows about it.

    xnnpack.py    ExecuTorch's XNNPACK delegate for Arm CPUs
    ethos_u.py    ExecuTorch's Arm backend for Ethos-U NPUs (TOSA, then Vela)

A Backend holds its graph-quantize schemes (each with the quantizer builder), its lowering, whether its programs run
on this machine's ExecuTorch runtime, whether MLIA can estimate them, whether advanced_quantize's schemes lower on it,
and the tool versions that decide its compiled bytes. Device rows (devices/catalog.py) name a backend; validation,
the run.yaml writer, compilation, the profiling methods and the compatibility doc all read these objects. Adding a
backend is one module here (registered with `register_backend`) plus device rows. Nothing here imports torch at
import time: the builders and the lowering import it when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import UnsupportedError

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["KeepFloat", "Scheme", "Backend", "register_backend", "get_backend", "backends", "all_scheme_names"]

KeepFloat = Callable[["Node"], bool]
# (target profile or None, keep-float predicate, whether any node is kept float) -> a configured PT2E quantizer
QuantizerBuilder = Callable[[str | None, KeepFloat, bool], Any]
# (exported program, target profile or None, a folder for the tool's own files) -> the lowered EdgeProgramManager.
# A lowering writes nothing of np's: np_optimizer.compile writes the .pte, the record and the per-layer files.
Lowering = Callable[["ExportedProgram", str | None, Path], Any]
# (the program before lowering, target profile or None, delegation statistics, the tool's folder) -> the backend's own
# compile record fields, with "status" and "reason" when it has something to say (no operator delegated, ...)
Describe = Callable[["ExportedProgram", str | None, dict[str, Any], Path], dict[str, Any]]
# (target profile or None) -> the options its lowering actually uses (part of the compile cache key)
CompileOptions = Callable[[str | None], dict[str, Any]]


def no_compile_options(_target: str | None) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Scheme:
    """A graph-quantize scheme of one backend: its run.yaml name and how to build its quantizer."""

    name: str
    build: QuantizerBuilder
    description: str = ""


@dataclass(frozen=True)
class Backend:
    name: str  # as in the device rows and run.yaml messages: "xnnpack", "ethos-u"
    display_name: str
    schemes: tuple[Scheme, ...]
    lower: Lowering
    describe: Describe
    runs_on_host: bool  # its .pte runs on this machine's ExecuTorch runtime (fidelity of the .pte, on-device method)
    mlia_estimable: bool  # MLIA has a target for it (static estimates of latency and memory)
    advanced_quantize: bool  # advanced_quantize's Linear schemes lower on it
    tool_versions: tuple[str, ...] = ("executorch", "torch")  # packages whose versions decide the compiled bytes
    compile_options: CompileOptions = no_compile_options  # what besides the program decides the compiled bytes
    executorch_config: Callable[[], Any] | None = None  # the ExecutorchBackendConfig of to_executorch (None: default)
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scheme_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.schemes)

    def scheme(self, name: str) -> Scheme:
        found = next((s for s in self.schemes if s.name == name), None)
        if found is None:
            raise UnsupportedError(f"Scheme {name} is not available for the {self.name} backend.",
                                   hint=f"Schemes for {self.name}: {', '.join(self.scheme_names)}.",
                                   code="NP-GQ-422")
        return found


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    _BACKENDS[backend.name] = backend
    return backend


def _load() -> None:
    from np_optimizer.backends import ethos_u, xnnpack  # noqa: F401  importing registers them


def backends() -> tuple[Backend, ...]:
    """Every registered backend, in registration order."""
    _load()
    return tuple(_BACKENDS.values())


def get_backend(name: str) -> Backend:
    """The registered backend `name`, or an UnsupportedError listing the registered ones."""
    _load()
    backend = _BACKENDS.get(name)
    if backend is None:
        raise UnsupportedError(f"Unknown backend '{name}'.", hint=f"Backends: {', '.join(_BACKENDS)}.",
                               code="NP-CFG-422")
    return backend


def all_scheme_names() -> tuple[str, ...]:
    """Every graph-quantize scheme name of any backend (for messages about a name no backend knows)."""
    return tuple(dict.fromkeys(s for b in backends() for s in b.scheme_names))
