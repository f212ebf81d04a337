"""The one place np touches ExecuTorch's private API (names with a leading underscore): each function here says what
np relies on, and tests/adapters/test_executorch_private.py pins it on the installed ExecuTorch, so an upgrade that
moves or changes one fails there first, not deep inside a compile or a profile.

    deserialize_pte           the program of a .pte (exir._serialize._program.deserialize_pte_binary; ExecuTorch
                              exports it only as `exir._serialize._deserialize_pte_binary`): its delegates' ids
    xnnpack_graph_json        an XNNPACK delegate blob decoded to its flatbuffer's JSON (XNNHeader, the schema from
                              `_get_schema_bytes`, flatc through `exir._serialize._flatbuffer._flatc_decompile`)
    register_quantized_ops    `exir.passes._quant_patterns_and_replacements` imported: it defines the
                              quantized_decomposed::embedding_byte / embedding_4bit ops for export and to_edge
    experimental_warning      `exir._warnings.ExperimentalWarning`, the category of "experimental API" warnings
    edge_op_overload          the ATen OpOverload an edge dialect op wraps (EdgeOpOverload._op)
    pack_embedding_weight     quant_fusion::_pack_embedding_weight: ExecuTorch's int4 packing of an embedding table
    edge_config_unchecked     EdgeCompileConfig(_check_ir_validity=False): to_edge without the core-ATen and edge
                              IR checks (Arm's reference flow and XNNPACK's recipe), the same .pte otherwise
    arm_partition_hooks       calls around each NPU partition's TOSA lowering and Vela compile in the Arm backend:
                              TOSABackend._preprocess and EthosUBackend._compile_tosa_flatbuffer patched for a block,
                              the partition's tag (arm_get_first_delegation_tag) and its compile spec's intermediate
                              folder (`_get_intermediate_path`)
    rewrite_compile_specs     each delegate's compile specs (the ones to_executorch serializes into the .pte) rewritten
                              or dropped: `LoweredBackendModule._compile_specs`, since its public `compile_specs` has
                              no setter
    partition_rejects         why a partitioner left each node out, as it says it: the Arm support checks'
                              `WhyNoPartitionReporter.report_reject(node, reason)` and XNNPACK's configs'
                              `WhyNoPartition(node, reason)` (exir.backend.utils), patched for a block; both only log
                              their reasons (INFO table, DEBUG lines), so np takes them from the calls themselves

ExecuTorch is imported inside each function: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["deserialize_pte", "xnnpack_graph_json", "register_quantized_ops", "experimental_warning",
           "edge_op_overload", "pack_embedding_weight", "edge_config_unchecked", "arm_partition_hooks", "rewrite_compile_specs",
           "partition_rejects"]

# one patched lowering at a time: the patch is on the classes, for every thread (re-entrant: the hooks nest)
_PATCH_LOCK = threading.RLock()


def deserialize_pte(data: bytes) -> Any:
    """The `Program` (executorch.exir.schema) of a .pte's bytes: `.execution_plan[i].delegates[j].id` names each
    delegate's backend."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(data).program


def xnnpack_graph_json(processed: bytes) -> dict[str, Any]:
    """An XNNPACK delegate's processed bytes (XNNHeader + flatbuffer + constant data) as the JSON flatc makes of its
    flatbuffer: `xnodes` in the order the runtime creates their operators, each with `xnode_union_type`,
    `xnode_union` (its tensor ids: `*_id`) and `debug_handle`. Clamp bounds flatc writes as bare inf / -inf read as
    +-1e999 (infinity), which JSON has no word for."""
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader, _get_schema_bytes
    from executorch.exir._serialize._flatbuffer import _flatc_decompile

    header = XNNHeader.from_bytes(processed[:XNNHeader.EXPECTED_LENGTH])
    flatbuffer = processed[header.flatbuffer_offset:header.flatbuffer_offset + header.flatbuffer_size]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "schema.fbs").write_bytes(_get_schema_bytes())
        (work / "graph.bin").write_bytes(flatbuffer)
        _flatc_decompile(folder, str(work / "schema.fbs"), str(work / "graph.bin"))
        text = (work / "graph.json").read_bytes()
    graph = json.loads(re.sub(rb"(?<![\w\"])(-?)inf\b", rb"\g<1>1e999", text))
    return graph if isinstance(graph, dict) else {}


def register_quantized_ops() -> None:
    """Define quantized_decomposed::embedding_byte / embedding_4bit (and ExecuTorch's other quantized patterns) for
    torch, so programs using them export and go to edge."""
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401


def experimental_warning() -> type[Warning]:
    """The warning category ExecuTorch gives APIs it marks experimental (to silence one np calls knowingly)."""
    from executorch.exir._warnings import ExperimentalWarning

    category: type[Warning] = ExperimentalWarning
    return category


def edge_op_overload(target: Any) -> Any:
    """The ATen operator overload an edge dialect op (exir_ops.edge.aten.*) wraps; any other target as it is. Only for
    targets that are not OpOverloads themselves: an ATen OpOverload has an `_op` too (its builtin)."""
    return getattr(target, "_op", target)


def pack_embedding_weight(table: Any, bits: int) -> Any:
    """An integer embedding table packed as ExecuTorch's embedding_4bit kernel reads it (two weights per byte, the
    first in the high nibble), by the op ExecuTorch's own fusion pass uses."""
    import torch

    register_quantized_ops()  # defines quant_fusion::_pack_embedding_weight
    return torch.ops.quant_fusion._pack_embedding_weight(table, bits)


def edge_config_unchecked() -> Any:
    """The EdgeCompileConfig of Arm's reference flow (its passes emit ops outside core ATen) and of XNNPACK's recipe
    (get_xnnpack_edge_compile_config): no core-ATen or edge IR check, which ExecuTorch otherwise runs again on every
    program a pass builds; every other option is the default, so a program that passes the checks lowers to the same
    bytes (tests/adapters/test_executorch_private.py)."""
    from executorch.exir import EdgeCompileConfig

    return EdgeCompileConfig(_check_ir_validity=False)


@contextlib.contextmanager
def arm_partition_hooks(before_tosa: Callable[[str | None], None], after_tosa: Callable[[str | None], None],
                        before_vela: Callable[[bytes], None]) -> Iterator[None]:
    """For the block, ExecuTorch's Arm backend calls `before_tosa(tag)` before each NPU partition's TOSA lowering
    (its delegation tag, None when it has none), `after_tosa(folder)` after it (the compile spec's intermediate folder,
    where the lowering left its .tosa and debug.json; None when it keeps none), and `before_vela(tosa)` before each
    Vela compile (the partition's TOSA flatbuffer)."""
    from executorch.backends.arm.ethosu.backend import EthosUBackend
    from executorch.backends.arm.tosa.backend import TOSABackend, arm_get_first_delegation_tag

    original = TOSABackend._preprocess
    original_vela = EthosUBackend._compile_tosa_flatbuffer

    def tosa(edge_program: Any, compile_spec: Any) -> Any:
        before_tosa(arm_get_first_delegation_tag(edge_program.graph_module) or None)
        result = original(edge_program, compile_spec)
        folder = compile_spec._get_intermediate_path()
        after_tosa(str(folder) if folder else None)
        return result

    def vela(tosa_flatbuffer: bytes, compile_spec: Any) -> Any:
        before_vela(tosa_flatbuffer)
        return original_vela(tosa_flatbuffer, compile_spec)

    with _PATCH_LOCK:
        TOSABackend._preprocess = staticmethod(tosa)
        EthosUBackend._compile_tosa_flatbuffer = staticmethod(vela)
        try:
            yield
        finally:
            TOSABackend._preprocess = original
            EthosUBackend._compile_tosa_flatbuffer = original_vela


def rewrite_compile_specs(edge: Any, rewrite: Callable[[str, bytes], bytes | None]) -> int:
    """Every delegate's compile specs in every method of a lowered EdgeProgramManager, rewritten in place before
    to_executorch (which stores them in the .pte as they are): `rewrite(key, value)` gives the spec's new value, or
    None to drop it. Returns how many delegates it saw (nested control-flow submodules included)."""
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    seen = 0
    for method in sorted(edge.methods):
        for module in edge.exported_program(method).graph_module.modules():
            if not isinstance(module, LoweredBackendModule):
                continue
            seen += 1
            specs = []
            for spec in module.compile_specs:
                value = rewrite(spec.key, bytes(spec.value))
                if value is not None:
                    specs.append(CompileSpec(spec.key, value))
            module._compile_specs = specs
    return seen


@contextlib.contextmanager
def partition_rejects() -> Iterator[dict[str, str]]:
    """For the block, every reason a partitioner gives for leaving a node out of its delegate, as {node name: reason}
    (the first reason per node, as the Arm reporter keeps it; call_function nodes only: placeholders and outputs are
    not work). A node one check rejects may still be taken by another (XNNPACK tries several configs per op), so the
    caller keeps the reasons of the nodes the lowered program left outside its delegates only."""
    from executorch.exir.backend.utils import WhyNoPartition, WhyNoPartitionReporter

    found: dict[str, str] = {}
    original_reject = WhyNoPartitionReporter.report_reject
    original_why = WhyNoPartition.__call__

    def note(node: Any, reason: Any) -> None:
        if getattr(node, "op", None) == "call_function" and reason:
            found.setdefault(str(node.name), " ".join(str(reason).split()))

    def report_reject(self: Any, node: Any, reason: str) -> None:
        note(node, reason)
        original_reject(self, node, reason)

    def why(self: Any, node: Any, reason: str) -> None:
        note(node, reason)
        original_why(self, node, reason)

    with _PATCH_LOCK:
        WhyNoPartitionReporter.report_reject = report_reject
        WhyNoPartition.__call__ = why
        try:
            yield found
        finally:
            WhyNoPartitionReporter.report_reject = original_reject
            WhyNoPartition.__call__ = original_why
