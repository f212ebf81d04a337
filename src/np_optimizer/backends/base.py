"""The Backend type and the registry of backends (each backend module registers one; see the package doc)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import UnsupportedError
from np_optimizer.records.base import Record  # ==, hash(), repr() shared: cheaper to define
from np_optimizer.registry import Registry

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["FLOAT", "NodeFormat", "MixedBuilder", "FormatLimit", "KeepFloat", "QuantizerBuilder", "Lowered", "Lowering", "Describe", "CompileOptions", "DelegateOps", "Scheme", "Backend", "BACKENDS",
           "register_backend"]

KeepFloat = Callable[["Node"], bool]
FLOAT = "float"  # the per-layer format that leaves a layer unquantized (graph_quantize's `layers:`)
NodeFormat = Callable[["Node"], str]  # a node's format: one of the backend's scheme names, or FLOAT
# (target profile or None, the step's scheme, each node's format) -> a PT2E quantizer giving each node its format
MixedBuilder = Callable[[str | None, str, NodeFormat], Any]
# (target profile or None, a format, a node's op such as "aten.matmul.default") -> (the format the backend takes
# instead, why), or None when it takes the node in that format
FormatLimit = Callable[[str | None, str, str], "tuple[str, str] | None"]
# (target profile or None, keep-float predicate, whether any node is kept float) -> a configured PT2E quantizer
QuantizerBuilder = Callable[[str | None, KeepFloat, bool], Any]
# (exported program, target profile or None, a folder for the tool's own files) -> what it lowered (Lowered). A
# lowering writes nothing of np's: np_optimizer.compile writes the .pte, the record and the per-layer files.
Lowering = Callable[["ExportedProgram", str | None, Path], "Lowered"]
# (the program before lowering, target profile or None, delegation statistics, the tool's folder) -> the backend's own
# compile record fields, with "status" and "reason" when it has something to say (no operator delegated, ...)
Describe = Callable[["ExportedProgram", str | None, dict[str, Any], Path], dict[str, Any]]
# (target profile or None) -> the options its lowering actually uses (part of the compile cache key)
CompileOptions = Callable[[str | None], dict[str, Any]]
# (a delegate's processed bytes) -> the ops its runtime runs, in order: {"type", "handle", "inputs", "output"}
DelegateOps = Callable[[bytes], list[dict[str, Any]]]


@dataclass(frozen=True, eq=False, repr=False)
class Lowered(Record):
    """What a lowering found: the lowered EdgeProgramManager, and why its partitioner left nodes out of the delegate,
    by node name, in the partitioner's words (adapters/executorch_private.partition_rejects). The compile keeps the
    reasons of the nodes that stayed outside (layers_graph.json)."""

    edge: Any
    rejected: dict[str, str] = field(default_factory=dict)


def no_compile_options(_target: str | None) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, eq=False, repr=False)
class Scheme(Record):
    """A graph-quantize scheme of one backend: its run.yaml name and how to build its quantizer."""

    name: str
    build: QuantizerBuilder
    description: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class Backend(Record):
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
    # What views need to know, so that no view tests a backend by name:
    delegated_column: str | None = None  # the pipeline table's column of delegated / total ops (None: not shown)
    layer_costs: bool = False  # its estimates carry a cost per layer (Vela's cycles); else layers rank by MACs
    # The ops inside one of its delegates, in run order, for per-layer times from an ETDump (None: not readable).
    delegate_ops: DelegateOps | None = None
    # Its lowering again, keeping ExecuTorch's ETRecord (generate_etrecord=True), for np export --level inspect
    # (compile/etrecord.py). The compile makes none: np's views read the trace map, only the Inspector reads an
    # ETRecord, and making one at every compile cost about 0.5 s of CPU per ResNet-18 compile. None: no ETRecord.
    lower_with_etrecord: Lowering | None = None
    # Its lowering can run for minutes (Ethos-U: TOSA lowering, then Vela): np lowers in a watched child process
    # (processes.run_watched) that shows its stage and stops at run.detail.yaml's time_limit. The lowering says what
    # it is doing through processes.stage().
    watched: bool = False
    # What the views call its delegate ("1 op left the NPU"), and the reason of an op its partitioner left out
    # without saying why ({op}: the op's name, e.g. aten.cumsum).
    accelerator: str = "the delegate"
    no_reason: str = "left out of the delegate by its partitioner ({op}; no reason given)"
    # Imports its lowering needs, run in np's own process before a watched child forks, so that each lowering does
    # not pay them again (ExecuTorch's Arm backend: about 1.5 s).
    preload: Callable[[], None] | None = None
    # What every process lowering or quantizing for it traces again (pattern graphs), traced once in the sweep's warm
    # trial host before it forks the trials (backends/traced_once.py: run in one intra-op thread, so the fork is safe).
    trace_once: Callable[[], None] | None = None
    # The sweep's warm host rehearses its compile after its first fork (compile/rehearsal.py: a small model quantized
    # in each scheme and lowered, beside that trial): what torch and ExecuTorch build on a first call, built once for
    # every trial forked later. Only where it was measured to pay (XNNPACK: about 0.4 s a trial).
    rehearse: bool = False
    # Per-layer formats (graph_quantize's `layers:`): the quantizer that gives each node its own scheme (None: the
    # backend has none), and what its compiler refuses in a format, said before anything compiles.
    mixed: MixedBuilder | None = None
    format_limit: FormatLimit | None = None
    # Its quantizer gives the model's inputs and output their own format (`layers:`'s `<input>` and `<output>`); else
    # an input is quantized in the format of the layer that reads it, and the two names are refused (R045).
    io_formats: bool = False
    # graph_optimize's target rewrites (graph/rewrites/'s names) for patterns its partitioner refuses: the step runs
    # these on a device of this backend, each given the device's target profile.
    rewrites: tuple[str, ...] = ()

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


# Unknown names fail with NP-CFG-422 (exit 3), as before the registry was generic. Each backend's module is named
# after it (ethos-u: ethos_u.py): looking one up (np report's labels) imports that module only, not Ethos-U's tools.
BACKENDS: Registry[Backend] = Registry("backend", package="np_optimizer.backends",
                                       module_of=lambda name: name.replace("-", "_"))


def register_backend(backend: Backend) -> Backend:
    return BACKENDS.register(backend.name, backend)
