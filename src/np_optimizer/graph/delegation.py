"""What a lowering delegated: ops inside backend delegates and ops left to the portable CPU kernels."""

from __future__ import annotations

import operator
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import GraphModule, Node

__all__ = ["delegation_stats", "op_name", "planned_arena_bytes"]

_PLUMBING = {"getitem"}


def op_name(node: Node) -> str:
    """Short op name without the overload: 'aten.convolution', 'quantized_decomposed.quantize_per_tensor'."""
    target = node.target
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "_name", None) or getattr(target, "__name__", None) or str(target)
    return str(name).replace("::", ".")


def _histogram(gm: GraphModule) -> Counter[str]:
    return Counter(op_name(n) for n in gm.graph.nodes if n.op == "call_function" and op_name(n) not in _PLUMBING)


def delegation_stats(edge_program: ExportedProgram) -> dict[str, Any]:
    """Ops inside delegates (counted in each lowered module's original subgraph) and ops left outside.

    getitem, placeholders and outputs are plumbing, not ops, and are not counted.
    """
    import torch

    gm = edge_program.graph_module
    delegated: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    num_delegates = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.higher_order.executorch_call_delegate:
            num_delegates += 1
            lowered = getattr(gm, node.args[0].target)
            delegated.update(_histogram(lowered.original_module.graph_module))
        elif op_name(node) not in _PLUMBING:
            outside[op_name(node)] += 1
    return {
        "num_delegates": num_delegates,
        "delegated_ops": sum(delegated.values()),
        "non_delegated_ops": sum(outside.values()),
        "delegated_histogram": dict(delegated),
        "non_delegated_histogram": dict(outside),
    }


def planned_arena_bytes(program: Any) -> int:
    """Memory-planned activation arena of 'forward' (XNNPACK's own workspace is not included)."""
    return int(sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes))
