"""Find the layers advanced_quantize made in an exported program, so later steps can leave them as they are.

A Linear quantized by advanced_quantize exports as `aten.linear(dq(x), dequantize_per_channel[_group](int8 weight))`:
its weight operand is already a dequantize of a constant. graph_quantize passes these layers' module paths as
`keep_float` so the PT2E quantizer does not annotate them (it would otherwise observe the dequantized weight and
quantize it a second time, turning int4 into int8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["aq_layers", "aq_modules"]

_LINEAR = ("aten.linear.default", "aten.addmm.default", "aten.mm.default")


def _name(target: Any) -> str:
    """"aten.linear.default", "quantized_decomposed.dequantize_per_token.default", ... (str of an OpOverload)."""
    if hasattr(target, "_schema"):
        return str(target)
    return str(getattr(target, "__name__", None) or target)


def _module_of(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return str(node.name)
    path = str(list(stack.values())[-1][0])
    prefix = "L['self']."
    return path[len(prefix):] if path.startswith(prefix) else path


def _weight_precision(dq: Any) -> str:
    op = _name(dq.target)
    if op.startswith("quantized_decomposed.dequantize_per_channel_group"):
        qmin, qmax, group = dq.args[3], dq.args[4], dq.args[6]
        bits = 4 if (qmin, qmax) in ((-8, 7), (-7, 7)) else 8
        return f"int{bits} groups of {group}"
    if op.startswith("quantized_decomposed.dequantize_per_channel"):
        qmin, qmax = dq.args[4], dq.args[5]
        bits = 4 if (qmin, qmax) in ((-8, 7), (-7, 7)) else 8
        return f"int{bits} per channel"
    return op


def _activation_precision(arg: Any) -> str:
    if getattr(arg, "op", None) != "call_function":
        return "float"
    op = _name(arg.target)
    if op.startswith("quantized_decomposed.dequantize_per_token"):
        return "int8 dynamic per-token"
    if op == "quantized_decomposed.dequantize_per_tensor.tensor":
        return "int8 dynamic per-tensor"
    if op.startswith("quantized_decomposed.dequantize_per_tensor"):
        return "int8 static per-tensor"
    return "float"


def _is_prequantized_weight(arg: Any) -> bool:
    if getattr(arg, "op", None) != "call_function":
        return False
    if not _name(arg.target).startswith("quantized_decomposed.dequantize"):
        return False
    source = arg.args[0] if arg.args else None
    return getattr(source, "op", None) in ("placeholder", "get_attr")


def aq_layers(program: ExportedProgram) -> list[dict[str, str]]:
    """Per already-quantized Linear node: node name, module path, weight and activation precision."""
    rows = []
    for node in program.graph.nodes:
        if node.op != "call_function" or _name(node.target) not in _LINEAR or len(node.args) < 2:
            continue
        weight = node.args[1]
        if _name(node.target) == "aten.addmm.default":
            weight = node.args[2]
        if _is_prequantized_weight(weight):
            rows.append({"node": node.name, "module": _module_of(node), "weight": _weight_precision(weight),
                         "activation": _activation_precision(node.args[0] if _name(node.target) != "aten.addmm.default"
                                                             else node.args[1])})
    return rows


def aq_modules(program: ExportedProgram) -> frozenset[str]:
    """Module paths of the already-quantized Linear layers (graph_quantize's keep_float)."""
    return frozenset(row["module"] for row in aq_layers(program))
