"""The XNNPACK backend: ExecuTorch's XNNPACK delegate for Arm CPUs. Its schemes use XNNPACKQuantizer; its programs
run on this machine's ExecuTorch runtime."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.backends.base import (
    Backend,
    KeepFloat,
    Lowered,
    NodeFormat,
    QuantizerBuilder,
    Scheme,
    register_backend,
)

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["XNNPACK", "lower_xnnpack", "lower_xnnpack_etrecord", "describe_xnnpack", "xnnpack_delegate_ops", "register_quantized_out_variants"]


def register_quantized_out_variants() -> None:
    """ExecuTorch's out-variant kernels of quantized_decomposed::* ops, needed by to_executorch() for q/dq nodes left
    outside a delegate. Importing a quantizer registers them as a side effect; a process that only loads a .pt2 must
    import them itself ("Missing out variants" otherwise)."""
    import executorch.kernels.quantized  # noqa: F401


def xnnpack_compile_options(_target: str | None) -> dict[str, Any]:
    """XNNPACK lowers the same for every Arm CPU device: its partitioner with default settings, no target."""
    return {"partitioner": "XnnpackPartitioner()"}


def lower_xnnpack(program: ExportedProgram, _target: str | None, _work_dir: Path) -> Lowered:
    return _lower(program, etrecord=False)


def lower_xnnpack_etrecord(program: ExportedProgram, _target: str | None, _work_dir: Path) -> Lowered:
    """lower_xnnpack keeping ExecuTorch's ETRecord (the same lowered program: generate_etrecord only adds a copy of
    the edge program and the maps the Inspector reads)."""
    return _lower(program, etrecord=True)


def _lower(program: ExportedProgram, *, etrecord: bool) -> Lowered:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from np_optimizer.adapters.executorch_private import edge_config_unchecked, partition_rejects
    from np_optimizer.graph.embedding_kernels import fuse_quantized_embeddings

    register_quantized_out_variants()
    # XNNPACK has no embedding: quantized tables go to ExecuTorch's quantized embedding kernels, outside the delegate
    program, _count = fuse_quantized_embeddings(program)
    # the compile writes no ETRecord (np export --level inspect makes one: `etrecord`); it lowers without the edge IR
    # check, as XNNPACK's own recipe lowers (get_xnnpack_edge_compile_config): it verified the program again after
    # each pass, about a tenth of the lowering's CPU; the check only raises, the .pte is the same
    with partition_rejects() as rejected:  # XNNPACK's configs say why for some ops (alpha != 1, a dtype, a rank)
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()],
                                           compile_config=edge_config_unchecked(), generate_etrecord=etrecord)
    return Lowered(edge, dict(rejected))


def xnnpack_delegate_ops(processed: bytes) -> list[dict[str, Any]]:
    """The nodes of an XNNPACK delegate's serialized graph, in the order its runtime creates (and runs) their
    operators: node type, the debug handle of the graph node it came from (None for nodes the delegate inserted,
    such as layout transposes), and its tensor ids (so an inserted node can be given to its producer).

    Why parse the blob: XNNPACK's per-operator ETDump events carry no debug handle, only names in run order."""
    from np_optimizer.adapters.executorch_private import xnnpack_graph_json

    graph = xnnpack_graph_json(processed)
    ops = []
    for node in graph.get("xnodes") or []:
        fields = node.get("xnode_union") or {}
        ids = {k: v for k, v in fields.items() if k.endswith("_id") and isinstance(v, int)}
        handle = node.get("debug_handle")
        ops.append({"type": node.get("xnode_union_type"), "handle": handle if isinstance(handle, int) else None,
                    "inputs": [v for k, v in ids.items() if k != "output_id"], "output": ids.get("output_id")})
    return ops


def describe_xnnpack(_program: ExportedProgram, _target: str | None, stats: dict[str, Any],
                     _work_dir: Path) -> dict[str, Any]:
    if stats["num_delegates"] == 0:
        return {"reason": "XNNPACK delegated no operator; the .pte runs on portable CPU kernels only"}
    return {}


def _quantizer(config_kwargs: dict[str, Any], linear_only: bool) -> QuantizerBuilder:
    def build(_target: str | None, keep: KeepFloat, keep_any: bool) -> Any:
        import torch
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        config = get_symmetric_quantization_config(**config_kwargs)
        quantizer = XNNPACKQuantizer()
        if linear_only:
            # XNNPACK packs 4-bit weights for 2-D (linear) weights only; a 4-bit conv fails at lowering.
            quantizer.set_operator_type(torch.ops.aten.linear.default, config)
        else:
            quantizer.set_global(config)
        if keep_any:
            # XNNPACKQuantizer has no set_module_name(name, None); its node filter leaves the rest float.
            quantizer.set_filter_function(lambda node: not keep(node))
        return quantizer

    return build


def _mixed_quantizer(target: str | None, scheme: str, node_format: NodeFormat) -> Any:
    """XNNPACKQuantizer takes one config per module name, type or operator, and none per node: one quantizer per
    format, each quantizing only the nodes of its format (its filter), composed. Static, dynamic and 4-bit layers
    then lower in the same XNNPACK delegate."""
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer

    del scheme  # every node's format is named by node_format, the scheme's nodes included
    def other_than(name: str) -> KeepFloat:  # a scheme's quantizer leaves the other formats' nodes alone
        return lambda node: node_format(node) != name

    return ComposableQuantizer([s.build(target, other_than(s.name), True) for s in XNNPACK.schemes])


def _trace_once() -> None:
    from np_optimizer.backends.traced_once import xnnpack_patterns

    xnnpack_patterns()


XNNPACK = register_backend(Backend(
    name="xnnpack",
    display_name="XNNPACK (ExecuTorch, Arm CPU)",
    schemes=(
        Scheme("W8-A8", _quantizer({"is_per_channel": True}, linear_only=False),
               "static int8 weights (per channel) and activations; needs calibration"),
        Scheme("W8-A8_dynamic", _quantizer({"is_per_channel": True, "is_dynamic": True}, linear_only=False),
               "int8 weights, activations quantized at run time"),
        # int4 range in int8 storage; XNNPACK packs it to 4 bits when it lowers a Linear.
        Scheme("W4-A8_dynamic", _quantizer({"is_per_channel": True, "is_dynamic": True, "weight_qmin": -8,
                                            "weight_qmax": 7}, linear_only=True),
               "4-bit weights of Linear layers, activations quantized at run time; convolutions stay float"),
    ),
    lower=lower_xnnpack,
    describe=describe_xnnpack,
    runs_on_host=True,
    mlia_estimable=False,
    advanced_quantize=True,
    delegated_column="Delegated (XNNPACK)",
    compile_options=xnnpack_compile_options,
    delegate_ops=xnnpack_delegate_ops,
    lower_with_etrecord=lower_xnnpack_etrecord,
    accelerator="XNNPACK",
    rewrites=("avg_pool_for_xnnpack", "mean_keepdim", "drop_constant_attention_mask"),
    no_reason="no XNNPACK kernel for {op}",  # XNNPACK has no config for the op: its partitioner never looks at it
    mixed=_mixed_quantizer,
    trace_once=_trace_once,
    rehearse=True,
))
