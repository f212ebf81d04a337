"""PT2E post-training quantization with the backend's own quantizer.

    quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=[...], keep_float={...})

The schemes and their quantizer builders belong to the backends (np_optimizer.backends): a new scheme is one
`Scheme(name, build)` in its backend's module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import KeepFloat, get_backend

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["quantize_program", "quantized_layers", "weighted_layers"]

def _module_path(path: str) -> str:
    prefix = "L['self']."  # older capture APIs; torch.export records "layer1.conv"
    return path[len(prefix):] if path.startswith(prefix) else path


def _keep_float(names: frozenset[str]) -> KeepFloat:
    """True for nodes to leave in float: the node's name, or any enclosing module's path, is in `names`."""

    def matches(node: Node) -> bool:
        if node.name in names:
            return True
        stack = node.meta.get("nn_module_stack") or {}
        return any(_module_path(path) in names for path, _ in stack.values())

    return matches


def quantize_program(program: ExportedProgram, *, backend: str, scheme: str, target: str | None,
                     calibration: Sequence[tuple[torch.Tensor, ...]],
                     keep_float: Iterable[str] = frozenset()) -> ExportedProgram:
    """Prepare, calibrate on every sample, convert, and re-export (lowering takes an ExportedProgram)."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    build = get_backend(backend).scheme(scheme).build  # UnsupportedError names the backend's schemes
    names = frozenset(keep_float)
    quantizer = build(target, _keep_float(names), bool(names))
    # check_guards=False: the default adds a `_guards_fn` call_module node the Arm quantizer's passes reject.
    prepared = prepare_pt2e(program.module(check_guards=False), quantizer)
    with torch.no_grad():
        for sample in calibration:
            prepared(*sample)
    converted = convert_pt2e(prepared)
    program = torch.export.export(converted, tuple(calibration[0]))
    # The re-exported program still carries the float weights, unused: drop them so the checkpoint holds only what
    # it computes with (the .pt2 of the sample CNN shrinks from 713 KB to about 190 KB).
    from np_optimizer.graph.passes import remove_dead_code

    return remove_dead_code(program).ep


_WEIGHTED = ("conv", "linear", "addmm", "mm", "bmm")


def _op(node: Any) -> str:
    target = node.target
    return str(getattr(target, "_name", None) or getattr(target, "__name__", None) or target).replace("::", ".")


def _is_weighted(node: Any) -> bool:
    """A conv or matmul-like ATen node with a weight operand (`aten.conv2d.default`, `aten.linear.default`)."""
    if node.op != "call_function" or len(node.args) < 2:
        return False
    parts = _op(node).split(".")
    return parts[0] == "aten" and len(parts) > 1 and any(k in parts[1] for k in _WEIGHTED)


def _module_of(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return _module_path(list(stack.values())[-1][0]) if stack else node.name


def weighted_layers(program: ExportedProgram) -> list[tuple[str, str]]:
    """(node name, module path) of every conv/linear-like node, in graph order: the candidates for mixed precision."""
    return [(n.name, _module_of(n)) for n in program.graph.nodes if _is_weighted(n)]


def _precision(arg: Any) -> str:
    name = _op(arg) if getattr(arg, "op", None) == "call_function" else ""
    if not name.startswith("quantized_decomposed.dequantize"):
        return "float"
    qmin, qmax, dtype = arg.args[-3], arg.args[-2], arg.args[-1]
    bits = {(-8, 7): "int4", (-7, 7): "int4"}.get((qmin, qmax), str(dtype).replace("torch.", ""))
    return f"{bits} dynamic" if name.endswith(".tensor") else bits


def quantized_layers(program: ExportedProgram) -> list[dict[str, str]]:
    """Per conv/linear node: module path, weight precision and activation precision, read from the q/dq pattern."""
    return [{"node": n.name, "module": _module_of(n), "op": _op(n), "weight": _precision(n.args[1]),
             "activation": _precision(n.args[0])} for n in program.graph.nodes if _is_weighted(n)]
