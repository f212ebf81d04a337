"""The trace map of a compiled program (`layers_trace.json` beside the .pte): for each instruction of the program's
chain, what the runtime's ETDump events of that instruction belong to. Written at compile time, because only the
lowered program knows it; read without torch by host_times.py (np's per-layer host times need no ETRecord).

    {"schema_version": 1, "method": "forward",
     "instructions": [{"id": 3, "kind": "kernel", "op": "aten::avg_pool2d.out", "handles": [6]},
                      {"id": 4, "kind": "delegate", "delegate": 1, "backend": "XnnpackBackend",
                       "ops": [{"type": "XNNConv2d", "handle": 4, "inputs": [..], "output": 7}, ...] or null}]}

`handles` are the debug handles of the graph nodes (layers_graph.json's ops carry them); a delegate's `ops` are its
runtime operators in run order (None when its backend cannot list them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.files import write_json

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from np_optimizer.backends import Backend

__all__ = ["TRACE_FILE", "delegate_handles", "trace_map", "write_trace_files"]

TRACE_FILE = "layers_trace.json"
TRACE_SCHEMA = 1


def delegate_handles(lowered: ExportedProgram, backend: Backend) -> list[dict[str, Any]]:
    """Per delegate of the lowered program, in graph order (the numbering of layers_graph.json): the debug handles of
    its nodes and the ops its runtime runs. Read before to_executorch, whose emitter renumbers handles."""
    import torch

    gm = lowered.graph_module
    out = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.executorch_call_delegate:
            module = getattr(gm, node.args[0].target)
            handles = sorted({int(n.meta["debug_handle"]) for n in module.original_module.graph.nodes
                              if n.op == "call_function" and isinstance(n.meta.get("debug_handle"), int)})
            ops = None
            if backend.delegate_ops is not None:
                try:
                    ops = backend.delegate_ops(bytes(module.processed_bytes))
                except Exception:  # an unreadable delegate: its time stays the delegate's, not spread over layers
                    ops = None
            out.append({"handles": handles, "backend": module.backend_id, "ops": ops})
    return out


def _handles(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value or [] if isinstance(v, int)]


def trace_map(executorch_program: Any, delegates: list[dict[str, Any]], method: str = "forward") -> dict[str, Any]:
    """The map of the program's instructions (ExecutorchProgramManager) to graph nodes and delegate ops."""
    program = executorch_program.executorch_program
    plan = next(p for p in program.execution_plan if p.name == method)
    handle_map = executorch_program.debug_handle_map  # {method: {instruction id: handle or [handles]}}
    handle_map = handle_map.get(method, {}) if method in handle_map else handle_map
    instructions = []
    for index, instruction in enumerate(plan.chains[0].instructions):
        args = instruction.instr_args
        kind = type(args).__name__
        handles = _handles(handle_map.get(index))
        if kind == "KernelCall":
            operator = plan.operators[args.op_index]
            name = f"{operator.name}.{operator.overload}" if operator.overload else operator.name
            instructions.append({"id": index, "kind": "kernel", "op": name, "handles": handles})
        elif kind == "DelegateCall":
            found = max(range(len(delegates)), default=None,
                        key=lambda d: len(set(delegates[d]["handles"]) & set(handles)))
            entry = delegates[found] if found is not None else {"backend": None, "ops": None}
            instructions.append({"id": index, "kind": "delegate", "delegate": found, "backend": entry["backend"],
                                 "ops": entry["ops"], "handles": handles})
    return {"schema_version": TRACE_SCHEMA, "method": method, "instructions": instructions}


def write_trace_files(executorch_program: Any, delegates: list[dict[str, Any]], out_dir: Path) -> list[str]:
    """The trace map, best effort (a compile never fails for a view); the files written. No ETRecord: np's rows need
    the trace map only; an ETRecord for ExecuTorch's Inspector is made when asked for (compile/etrecord.py)."""
    try:
        write_json(out_dir / TRACE_FILE, trace_map(executorch_program, delegates))
    except Exception as exc:
        write_json(out_dir / TRACE_FILE, {"schema_version": TRACE_SCHEMA, "error": f"{type(exc).__name__}: {exc}",
                                          "instructions": []})
    return [TRACE_FILE]
