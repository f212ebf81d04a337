"""Weight-only quantization of embedding tables (nn.Embedding), which no backend's PT2E quantizer annotates for
XNNPACK: graph_quantize's `embedding` option.

    quantize_embeddings(program, bits=8, group_size=32, keep_float=...) -> (program, report)

Each `aten.embedding` whose table is a float constant that only embeddings read gets an integer table and a
dequantize in front of it, the representation PT2E itself gives a quantized weight:

    bits 8: int8, one scale per row (symmetric)       dequantize_per_channel(q, scales, None, 0, -128, 127, int8)
    bits 4: int4 in int8 storage, one scale per       dequantize_per_channel_group(q, scales, None, -8, 7, int8,
            `group_size` weights of a row (symmetric)                              group_size, float32)

So the checkpoint runs anywhere a PT2E program runs (the per-layer SNR taps it like any layer), the statistics count
its table at one byte per element, and the lowering (graph/embedding_kernels.py) turns dequantize + embedding into
ExecuTorch's `quantized_decomposed::embedding_byte` / `embedding_4bit` kernels, which read the rows they need from
the integer table (4 bits packed two to a byte in the .pte) instead of dequantizing the whole table per inference.

A table another op also reads (a tied LM head still float) is left float: quantizing it for the embedding alone
would add an int8 copy beside the float one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["EMBEDDING_BITS", "EMBEDDING_OP", "quantize_embeddings", "quantize_table"]

EMBEDDING_BITS = (8, 4)
EMBEDDING_OP = "aten.embedding.default"
_RANGE = {8: (-128, 127), 4: (-8, 7)}


def quantize_table(weight: torch.Tensor, bits: int, group_size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(integer table in int8 storage, float32 scales) of a 2-D table: symmetric, one scale per row, or per
    `group_size` weights of a row (scales shaped rows x groups). A row (or group) of zeros gets scale 1."""
    import torch

    qmin, qmax = _RANGE[bits]
    rows, dim = weight.shape
    w = weight.detach().float()
    grouped = w.reshape(rows, -1, group_size or dim)  # rows x groups x weights
    absmax = grouped.abs().amax(dim=-1)
    scales = torch.where(absmax > 0, absmax / qmax, torch.ones_like(absmax))
    q = torch.clamp(torch.round(grouped / scales.unsqueeze(-1)), qmin, qmax).to(torch.int8).reshape(rows, dim)
    return q, (scales if group_size else scales.reshape(rows))


def _snr_db(reference: torch.Tensor, test: torch.Tensor) -> float | None:
    import math

    reference, test = reference.detach().double(), test.detach().double()
    signal, noise = float(reference.pow(2).sum()), float((reference - test).pow(2).sum())
    return None if noise == 0 or signal == 0 else round(10 * math.log10(signal / noise), 3)


def _table_problem(edit: Any, table: Any, bits: int, group_size: int) -> str | None:
    """Why this embedding's table is not quantized, or None."""
    value = edit.const_value(table)
    if value is None:
        return "its table is not a constant of the program (computed, or updated at run time)"
    if value.dim() != 2 or not value.is_floating_point():
        return f"its table is {value.dtype} shaped {tuple(value.shape)}, not a float matrix"
    if str(value.dtype) != "torch.float32":
        return f"its table is {str(value.dtype).replace('torch.', '')}; only float32 tables are quantized"
    others = sorted({str(u.target) for u in table.users if str(u.target) != EMBEDDING_OP})
    if others:
        return f"its table is also read by {', '.join(others)} (a tied weight): it stays float for them"
    if bits == 4 and value.shape[1] % group_size:
        return (f"its rows ({value.shape[1]} weights) do not split into groups of {group_size}: use a group_size "
                "that divides them, or bits 8")
    return None


def _quantize_table(edit: Any, node: Node, table: Node, bits: int, group: int | None) -> tuple[Node, dict[str, Any]]:
    """Insert the integer table, its scales and their dequantize before `node`; the dequantize and the report row."""
    import torch

    from np_optimizer.adapters.torch_private import register_quantized_decomposed

    register_quantized_decomposed()  # quantized_decomposed::dequantize_*

    weight = edit.const_value(table)
    q, scales = quantize_table(weight, bits, group)
    qmin, qmax = _RANGE[bits]
    prefix = edit.target(table)
    q_node = edit.add_const(f"{prefix}_int{bits}", q, "BUFFER")
    s_node = edit.add_const(f"{prefix}_scales", scales, "BUFFER")
    ops = torch.ops.quantized_decomposed
    with edit.graph.inserting_before(node):
        if group:
            dq = edit.graph.call_function(ops.dequantize_per_channel_group.default,
                                          (q_node, s_node, None, qmin, qmax, torch.int8, group, torch.float32))
        else:
            dq = edit.graph.call_function(ops.dequantize_per_channel.default,
                                          (q_node, s_node, None, 0, qmin, qmax, torch.int8))
    # the embedding's module, so that the dequantize is part of that layer (layer keys, per-layer SNR)
    dq.meta.update({k: node.meta[k] for k in ("nn_module_stack", "stack_trace", "torch_fn") if k in node.meta})
    dq.meta["val"] = table.meta["val"]
    rows = q.shape[0]
    dequantized = (q.float().reshape(rows, -1, group or q.shape[1]) * scales.reshape(rows, -1, 1)).reshape(q.shape)
    return dq, {"rows": int(rows), "dim": int(q.shape[1]),
                "weight": f"int{bits} " + (f"groups of {group}" if group else "per row"),
                "table_snr_db": _snr_db(weight, dequantized),
                "checkpoint_bytes_before": int(weight.numel() * weight.element_size()),
                "checkpoint_bytes_after": int(q.numel() + scales.numel() * scales.element_size())}


def quantize_embeddings(program: ExportedProgram, *, bits: int, group_size: int,
                        keep_float: Iterable[str] = frozenset()) -> tuple[ExportedProgram, dict[str, Any]]:
    """The program with every eligible embedding table quantized (module paths in `keep_float` excepted), and what
    was done: one row per embedding (module, table shape, precision, the table's own SNR, bytes before and after in
    the checkpoint) and the embeddings left float with the reason. The caller's program is not changed."""
    from torch.fx import Node

    from np_optimizer.graph.edit import ProgramEdit
    from np_optimizer.quantize.pt2e import module_path

    if bits not in EMBEDDING_BITS:
        raise ValueError(f"embedding bits must be one of {EMBEDDING_BITS}, got {bits!r}")
    kept = frozenset(keep_float)
    group = group_size if bits == 4 else None
    report: dict[str, Any] = {"bits": bits, "group_size": group, "layers": [], "left_float": []}
    if not any(n.op == "call_function" and str(n.target) == EMBEDDING_OP for n in program.graph.nodes):
        return program, report
    edit = ProgramEdit(program)
    tables: dict[str, Node] = {}  # table placeholder -> its dequantize (one per table, shared by its embeddings)
    for node in [n for n in edit.graph.nodes if n.op == "call_function" and str(n.target) == EMBEDDING_OP]:
        table, module = node.args[0], module_path(node)
        if module in kept or node.name in kept:
            report["left_float"].append({"module": module, "node": node.name, "reason": "kept float as configured"})
            continue
        if not isinstance(table, Node):
            continue
        if table.name not in tables:
            problem = _table_problem(edit, table, bits, group_size)
            if problem:
                report["left_float"].append({"module": module, "node": node.name, "reason": problem})
                continue
            tables[table.name], row = _quantize_table(edit, node, table, bits, group)
            report["layers"].append({"module": module, "node": node.name, **row})
        node.replace_input_with(table, tables[table.name])
    if not tables:
        return program, report
    edit.drop_unused_inputs(only=[n for n in edit.graph.nodes if n.op == "placeholder" and n.name in tables])
    return edit.finish(), report
