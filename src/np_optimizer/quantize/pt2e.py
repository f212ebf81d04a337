"""PT2E post-training quantization with the backend's own quantizer: one registry entry per (backend, scheme).

    quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=[...], keep_float={...})

A new scheme is one decorated function that returns a configured quantizer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import UnsupportedError

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import GraphModule, Node

__all__ = ["quantize_program", "registered_schemes", "quantized_layers", "weighted_layers"]

KeepFloat = Callable[["Node"], bool]
_QUANTIZERS: dict[tuple[str, str], Callable[[str | None, KeepFloat, bool], Any]] = {}


def _scheme(backend: str, scheme: str) -> Callable[[Callable[[str | None, KeepFloat, bool], Any]], Any]:
    def register(build: Callable[[str | None, KeepFloat, bool], Any]) -> Any:
        _QUANTIZERS[(backend, scheme)] = build
        return build

    return register


def registered_schemes(backend: str) -> tuple[str, ...]:
    return tuple(s for b, s in _QUANTIZERS if b == backend)


def _xnnpack(config_kwargs: dict[str, Any], linear_only: bool) -> Callable[[str | None, KeepFloat, bool], Any]:
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


_scheme("xnnpack", "W8-A8")(_xnnpack({"is_per_channel": True}, linear_only=False))
_scheme("xnnpack", "W8-A8_dynamic")(_xnnpack({"is_per_channel": True, "is_dynamic": True}, linear_only=False))
# int4 range in int8 storage; XNNPACK packs it to 4 bits when it lowers a Linear.
_scheme("xnnpack", "W4-A8_dynamic")(_xnnpack({"is_per_channel": True, "is_dynamic": True, "weight_qmin": -8,
                                             "weight_qmax": 7}, linear_only=True))


def _ethos_u(a16: bool) -> Callable[[str | None, KeepFloat, bool], Any]:
    def build(target: str | None, keep: KeepFloat, keep_any: bool) -> Any:
        from executorch.backends.arm import (
            EthosUCompileSpec,
            EthosUQuantizer,
            get_symmetric_a16w8_quantization_config,
            get_symmetric_quantization_config,
        )

        config = (get_symmetric_a16w8_quantization_config if a16 else get_symmetric_quantization_config)(
            is_per_channel=True)
        quantizer = EthosUQuantizer(EthosUCompileSpec(target or "ethos-u85-256"))
        quantizer.set_global(config)
        if keep_any:
            from executorch.exir._warnings import ExperimentalWarning

            with warnings.catch_warnings():  # set_node_finder is marked experimental in executorch 1.4
                warnings.simplefilter("ignore", ExperimentalWarning)
                quantizer.set_node_finder(None, _node_finder(keep))
        return quantizer

    return build


_scheme("ethos-u", "W8-A8")(_ethos_u(a16=False))
_scheme("ethos-u", "W8-A16")(_ethos_u(a16=True))


def _node_finder(keep: KeepFloat) -> Any:
    from executorch.backends.arm.quantizer.arm_quantizer_utils import NodeFinder

    # a node finder with config None overrides the global config; executorch's arm quantizer has no type information
    class _KeepFloatFinder(NodeFinder):  # type: ignore[misc]
        def find_nodes(self, model: GraphModule) -> Iterator[Node]:
            return (n for n in model.graph.nodes if keep(n))

    return _KeepFloatFinder()


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

    build = _QUANTIZERS.get((backend, scheme))
    if build is None:
        raise UnsupportedError(f"Scheme {scheme} is not available for the {backend} backend.",
                               hint=f"Schemes for {backend}: {', '.join(registered_schemes(backend))}.",
                               code="NP-GQ-422")
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
