"""The layers of a lowered program: every op, where it runs (inside a backend delegate or on the portable CPU
kernels), its layer key and its MACs, and for each op of work left outside the delegates the reason the backend's
partitioner gave (`reason`; the backend's `no_reason` when it gave none). Written at compile time as
`layers_graph.json` beside compile.json, so the views, the coverage and "what should I lower next" read it without
torch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.files import write_json
from np_optimizer.layers.keys import assign_keys, is_overhead, op_family
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import GraphModule

__all__ = ["GRAPH_FILE", "program_layers", "write_program_layers"]

GRAPH_FILE = "layers_graph.json"
GRAPH_SCHEMA = 1
_PLUMBING = {"getitem"}
# (De)quantization outside a delegate converts at the program's or a partition's edge: no layer's work, no reason.
_BOUNDARY = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")


def _is_boundary(op: str) -> bool:
    return any(op.endswith(b) for b in _BOUNDARY)


def _ops(gm: GraphModule, delegated: bool, delegate: int | None) -> list[dict[str, Any]]:
    import torch
    from torch.utils.flop_counter import flop_registry

    from np_optimizer.graph.delegation import op_name
    from np_optimizer.graph.stats import _node_flops

    rows = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is torch.ops.higher_order.executorch_call_delegate:
            continue
        name = op_name(node)
        if name in _PLUMBING:
            continue
        try:
            flops = _node_flops(node, flop_registry) if "val" in node.meta else None
        except Exception:  # a shape the formula cannot take: the op is counted without MACs
            flops = None
        rows.append({"id": node.name, "op": name, "stack": node.meta.get("nn_module_stack"),
                     "producers": [a.name for a in node.all_input_nodes], "fn": node.meta.get("torch_fn"),
                     "delegated": delegated,
                     "delegate": delegate, "macs": (flops or 0) // 2, "handle": node.meta.get("debug_handle")})
    return rows


def program_layers(edge_program: ExportedProgram, root_class: str = "model", *, rejected: dict[str, str] | None = None,
                   no_reason: str = "{op}: no reason given", accelerator: str = "the delegate") -> dict[str, Any]:
    """Every op of the lowered program (delegated ones from each delegate's original subgraph), with its key; each op
    of work outside the delegates with its reason (`rejected`: the partitioner's, by node name)."""
    import torch

    gm = edge_program.graph_module
    ops: list[dict[str, Any]] = []
    index = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.executorch_call_delegate:
            lowered = getattr(gm, node.args[0].target)
            ops += _ops(lowered.original_module.graph_module, True, index)
            index += 1
    ops += _ops(gm, False, None)
    keys = assign_keys(((o["id"], o["op"], o["stack"], o["producers"], o["fn"]) for o in ops), root_class)
    out = []
    for o in ops:
        family = op_family(o["op"])
        why = None if o["delegated"] or _is_boundary(o["op"]) else \
            (rejected or {}).get(o["id"]) or no_reason.format(op=o["op"])
        out.append({**to_dict(keys[o["id"]]), "id": o["id"], "op": o["op"], "op_family": family,
                    "overhead": is_overhead(family), "delegated": o["delegated"], "delegate": o["delegate"],
                    "macs": o["macs"], "handle": o["handle"], **({"reason": why} if why else {})})
    return {"schema_version": GRAPH_SCHEMA, "delegates": index, "accelerator": accelerator, "ops": out,
            "macs_convention": "np graph count (FLOPs/2 of conv and matmul-family ops)"}


def write_program_layers(edge_program: ExportedProgram, out_dir: Path, *, rejected: dict[str, str] | None = None,
                         no_reason: str = "{op}: no reason given", accelerator: str = "the delegate") -> None:
    """Best effort: a program whose layers cannot be listed still compiles (the views then say they have none)."""
    try:
        data = program_layers(edge_program, rejected=rejected, no_reason=no_reason, accelerator=accelerator)
    except Exception as exc:  # never fail a compile for a view
        data = {"schema_version": GRAPH_SCHEMA, "error": f"{type(exc).__name__}: {exc}", "ops": []}
    write_json(out_dir / GRAPH_FILE, data)
