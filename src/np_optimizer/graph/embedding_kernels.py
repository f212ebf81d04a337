"""Lowering quantized embeddings to ExecuTorch's kernels: `dequantize + aten.embedding` becomes
`quantized_decomposed::embedding_byte` (int8, a scale per row or per group) or `embedding_4bit` (int4 packed two to a
byte), so the runtime reads the rows it needs from the integer table. Left as it is, the dequantize would make a float
copy of the whole table in the activation arena on every inference (a 30522 x 256 table: 31 MB).

    fuse_quantized_embeddings(program) -> (program, count)     before to_edge: the backends' lowerings call it

Matches the pattern graph_quantize's `embedding` option writes (quantize/embedding.py): a dequantize of a constant
int8 table with no zero points (symmetric), along rows (axis 0) or in groups of a row, read by embeddings only.
Anything else is left alone.

The kernels: ExecuTorch's quantized kernel library (`executorch.kernels.quantized`), which also registers them in the
pybindings runtime of the same process; the runtimes np runs programs with import it (adapters/executorch_runtime.py,
the measuring script). The op schemas for export come from ExecuTorch's quantized patterns
(adapters/executorch_private.py: register_quantized_ops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["fuse_quantized_embeddings", "register_embedding_ops"]

_EMBEDDING = "aten.embedding.default"
_PER_ROW = "quantized_decomposed.dequantize_per_channel.default"
_PER_GROUP = "quantized_decomposed.dequantize_per_channel_group.default"


def register_embedding_ops() -> None:
    """Define `quantized_decomposed::embedding_byte/_4bit` for torch (export, to_edge) and load their ExecuTorch
    kernels (to_executorch, and the runtime of this process)."""
    import executorch.kernels.quantized  # noqa: F401

    from np_optimizer.adapters.executorch_private import register_quantized_ops

    register_quantized_ops()


def _kernel_args(edit: Any, dq: Node) -> tuple[int, Any, Any, int, int] | None:
    """(bits, integer table node, scales node, quant_min, quant_max) of a dequantize this module fuses, else None."""
    import torch

    op = str(dq.target) if getattr(dq, "op", None) == "call_function" else ""
    args: tuple[Any, ...] = tuple(dq.args)
    if op == _PER_ROW and len(args) >= 7:
        table, scales, zero_points, axis, qmin, qmax, dtype = args[:7]
        if axis != 0 or dq.kwargs.get("out_dtype") not in (None, torch.float32):
            return None
        bits = 8
    elif op == _PER_GROUP and len(args) >= 8:
        table, scales, zero_points, qmin, qmax, dtype, _group, out_dtype = args[:8]
        if out_dtype != torch.float32 or (qmin, qmax) != (-8, 7):
            return None
        bits = 4
    else:
        return None
    value = edit.const_value(table)
    if zero_points is not None or dtype != torch.int8 or value is None or value.dim() != 2 \
            or value.dtype != torch.int8 or edit.const_value(scales) is None:
        return None
    if bits == 4 and value.shape[1] % 2:
        return None
    return bits, table, scales, int(qmin), int(qmax)


def fuse_quantized_embeddings(program: ExportedProgram) -> tuple[ExportedProgram, int]:
    """The program with each matching dequantize + embedding replaced by the quantized embedding kernel, and how many
    were; the program itself when none matches (the caller's program is never changed)."""
    if not any(n.op == "call_function" and str(n.target) == _EMBEDDING and str(getattr(n.args[0], "target", ""))
               in (_PER_ROW, _PER_GROUP) for n in program.graph.nodes):
        return program, 0
    import torch

    from np_optimizer.adapters.executorch_private import pack_embedding_weight
    from np_optimizer.graph.edit import ProgramEdit

    register_embedding_ops()
    ops = torch.ops.quantized_decomposed
    edit = ProgramEdit(program)
    packed: dict[str, Node] = {}  # int4 table placeholder -> its packed copy
    tables: list[Node] = []  # the integer tables read through a fused dequantize (dropped once nothing reads them)
    count = 0
    for node in [n for n in edit.graph.nodes if n.op == "call_function" and str(n.target) == _EMBEDDING]:
        dq = node.args[0]
        found = _kernel_args(edit, dq) if hasattr(dq, "op") else None
        if found is None:
            continue
        bits, table, scales, qmin, qmax = found
        tables.append(table)
        if bits == 4:
            if table.name not in packed:
                value = edit.const_value(table)
                # ExecuTorch's own packing (the one its fusion pass uses): two weights per byte, the first high
                packed[table.name] = edit.add_const(f"{edit.target(table)}_packed", pack_embedding_weight(value, 4),
                                                    "BUFFER")
            table = packed[table.name]
        kernel = ops.embedding_4bit.default if bits == 4 else ops.embedding_byte.default
        with edit.graph.inserting_before(node):
            fused = edit.graph.call_function(kernel, (table, scales, None, qmin, qmax, node.args[1]))
        fused.meta = dict(node.meta)  # the embedding's module, stack and value: layers_graph.json keys it the same
        node.replace_all_uses_with(fused)
        edit.graph.erase_node(node)
        if not dq.users:
            edit.graph.erase_node(dq)
        count += 1
    edit.drop_unused_inputs(only=tables)
    return edit.finish(), count
