"""Static statistics of a torch.export program: op histogram, node count, MACs, parameters and weight bytes.

Counted on the exported graph itself (node.meta['val'] shapes, the program's state), so they need no run and work
the same on float, PT2E-quantized and torchao-quantized programs. torch is imported inside functions only.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["MACS_CONVENTION", "RECURRENT_GATES", "op_histogram", "node_count", "count_macs", "recurrent_nodes",
           "count_params", "weight_bytes"]

MACS_CONVENTION = (
    "one MAC = one multiply-accumulate of a convolution or matmul-family op, from torch.utils.flop_counter's "
    "formulas (FLOPs/2) on the exported graph's shapes, and of a recurrent layer's (LSTM, GRU, RNN) input and hidden "
    "matmuls at every step; pooling, activations, norms and element-wise ops count 0"
)
# Gates of each recurrent op (its weight_ih is [gates * hidden, input]); the op's own name in torch.ops.aten.
RECURRENT_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _target_name(target: Any) -> str:
    # str(aten.conv2d.default) == "aten.conv2d.default"; builtins such as operator.getitem print "<built-in ...>".
    if isinstance(target, str):
        return target
    name = str(target)
    if name.startswith("<built-in"):
        return str(getattr(target, "__name__", name))
    return name


def op_histogram(ep: ExportedProgram) -> dict[str, int]:
    """Count of call_function nodes per operator, e.g. {"aten.conv2d.default": 3}, sorted by name."""
    counts = Counter(_target_name(n.target) for n in ep.graph.nodes if n.op == "call_function")
    return dict(sorted(counts.items()))


def node_count(ep: ExportedProgram) -> int:
    """Number of operator (call_function) nodes; placeholders and the output node are excluded."""
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")


# ---------------------------------------------------------------------------------------------------------------------
# MACs
# ---------------------------------------------------------------------------------------------------------------------

_MATMUL_PACKETS = ("mm", "addmm", "bmm", "baddbmm")
_CONV_PACKETS = ("convolution", "_convolution")
_COMPOSITE_CONVS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def _shape(v: Any) -> list[int]:
    """Concrete shape; a dynamic dim takes its example-input value (the SymInt's hint) rather than int(), which would
    add a guard to the program's shape environment."""
    import torch

    return [int(s.node.hint) if isinstance(s, torch.SymInt) and s.node.hint is not None else int(s) for s in v.shape]


def _val(arg: Any) -> Any:
    return arg.meta.get("val") if hasattr(arg, "meta") else arg


def _matmul_flops(a: list[int], b: list[int], registry: dict[Any, Any]) -> int:
    """FLOPs of matmul(a, b) with numpy broadcasting, via the registry's bmm formula."""
    import torch

    a2 = [1] + a if len(a) == 1 else a  # vector operands become 1-row / 1-column matrices
    b2 = b + [1] if len(b) == 1 else b
    # torch.broadcast_shapes has no annotations
    nb = math.prod(torch.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))  # type: ignore[no-untyped-call]
    return int(registry[torch.ops.aten.bmm]([nb] + a2[-2:], [nb] + b2[-2:], out_val=None))


def _node_flops(node: Node, registry: dict[Any, Any]) -> int | None:
    """FLOPs of one node per torch's flop_registry, or None when the op is not counted."""
    import torch

    from np_optimizer.adapters.executorch_private import edge_op_overload
    from np_optimizer.adapters.torch_private import is_op_overload, tree_map

    aten = torch.ops.aten
    target = node.target
    # Edge ops wrap the aten overload; check the type first, since an ATen OpOverload also has an `_op` attribute
    # (the builtin), and unwrapping it would make every count 0.
    if not is_op_overload(target):
        target = edge_op_overload(target)
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return None
    vals = [_val(a) for a in node.args]
    name = packet.__name__
    if name in _MATMUL_PACKETS + _CONV_PACKETS:
        shapes = tree_map(
            lambda v: _shape(v) if isinstance(v, torch.Tensor) else v, (vals, dict(node.kwargs)))
        return int(registry[packet](*shapes[0], **shapes[1], out_val=_shape(_val(node))))
    if name in _COMPOSITE_CONVS:  # registry formula: (x, w, bias, stride, padding, dilation, transposed, ...)
        return int(registry[aten.convolution](_shape(vals[0]), _shape(vals[1]), None, None, None, None,
                                              name.startswith("conv_transpose"), out_val=_shape(_val(node))))
    if name == "linear":  # x @ w.T with any leading batch dims
        x, w = _shape(vals[0]), _shape(vals[1])
        return int(registry[aten.mm]([math.prod(x[:-1]), x[-1]], [w[-1], w[0]], out_val=None))
    if name in ("matmul", "mv", "dot", "vdot"):
        return _matmul_flops(_shape(vals[0]), _shape(vals[1]), registry)
    if name in RECURRENT_GATES:
        return 2 * _recurrent(node, target)[0]
    return None


def _recurrent(node: Node, target: Any) -> tuple[int, int]:
    """(MACs, parameter elements) of an aten.lstm / gru / rnn_tanh / rnn_relu node.

    Overload `input`: (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first); its
    input is [steps, batch, features] (batch_first: [batch, steps, features]; unbatched: [steps, features]), so the
    rows a step's matmuls take are every leading dim. Overload `data` (a packed sequence): (data, batch_sizes, hx,
    params, ...), with data [sum of the batch sizes, features]: its rows are data's first dim.

    Each layer and direction multiplies every row by weight_ih [gates * hidden, input width] and weight_hh
    [gates * hidden, hidden] (with proj_size, weight_hh's width is the projection and weight_hr [proj, hidden] is a
    third matmul), so MACs = rows x the elements of the 2-D weights: gates x (input + hidden) x hidden x steps x
    batch, summed over layers and directions, where a later layer's input width is hidden x directions.
    """
    import torch

    from np_optimizer.adapters.torch_private import overload_name

    data = overload_name(target) == "data"
    rows = math.prod(_shape(_val(node.args[0]))[:-1])
    params = [_val(p) for p in cast("list[Any]", node.args[3 if data else 2])]
    tensors = [p for p in params if isinstance(p, torch.Tensor)]
    weights = sum(math.prod(_shape(p)) for p in tensors if p.dim() == 2)
    return rows * weights, sum(math.prod(_shape(p)) for p in tensors)


def recurrent_nodes(ep: ExportedProgram) -> list[dict[str, Any]]:
    """Every recurrent node of the program: {node, op (lstm, gru, rnn_tanh, rnn_relu), macs, params (its weight
    and bias elements), params_float (those read as float, not through a dequantize), stack (nn_module_stack)}."""
    import torch

    from np_optimizer.adapters.torch_private import is_op_overload, overload_name

    out = []
    for node in ep.graph.nodes:
        target = node.target
        if node.op != "call_function" or not is_op_overload(target):
            continue
        name = target.overloadpacket.__name__
        if name not in RECURRENT_GATES or _val(node.args[0]) is None:
            continue
        macs, params = _recurrent(node, target)
        weights = cast("list[Any]", node.args[3 if overload_name(target) == "data" else 2])
        float_params = sum(math.prod(_shape(_val(w))) for w in weights
                           if not _is_dequant(getattr(w, "target", None)) and isinstance(_val(w), torch.Tensor)
                           and _val(w).is_floating_point())
        out.append({"node": node.name, "op": name, "macs": macs, "params": params, "params_float": float_params,
                    "stack": node.meta.get("nn_module_stack")})
    return out


def count_macs(ep: ExportedProgram) -> tuple[int, dict[str, int]]:
    """Static multiply-accumulates of conv and matmul-family nodes: (total, {node name: MACs}).

    Convention: MACs = FLOPs / 2 with FLOPs from `torch.utils.flop_counter.flop_registry` applied to the shapes in
    `node.meta['val']`: conv = N * C_out * (C_in/groups) * prod(kernel) * prod(out spatial) (transposed: input
    spatial), matmul = M * N * K (per batch). Bias adds, activations, pooling, norms and element-wise ops count 0.
    Composite ops the registry lacks (conv2d, linear, matmul, as kept by torch.export) are mapped to the registry's
    convolution/mm/bmm formulas; dot and mv are counted as matmuls (FlopCounterMode on eager skips them). Recurrent
    ops (aten.lstm, gru, rnn_tanh, rnn_relu, as torch.export keeps nn.LSTM/GRU/RNN) count their input and hidden
    matmuls at every step of every layer and direction (see `_recurrent`); their gate activations and element-wise
    products count 0, as elsewhere. Quantized
    graphs: the conv/linear nodes see dequantized float tensors, so their MACs are counted the same way. Dynamic dims
    are taken at the example input's size. `per_node` holds the counted nodes only.
    """
    from torch.utils.flop_counter import flop_registry

    per_node: dict[str, int] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or "val" not in node.meta:
            continue
        flops = _node_flops(node, flop_registry)
        if flops is not None:
            per_node[node.name] = flops // 2
    return sum(per_node.values()), per_node


# ---------------------------------------------------------------------------------------------------------------------
# Parameters and weight bytes
# ---------------------------------------------------------------------------------------------------------------------


def _is_dequant(target: Any) -> bool:
    from np_optimizer.adapters.torch_private import op_schema

    schema = op_schema(target)
    return getattr(target, "namespace", "") in ("quantized_decomposed", "torchao") and schema is not None and \
        "dequantize" in schema.name


# ExecuTorch's quantized embedding kernels read their integer table directly (no dequantize op before them): weights
# per stored element of the table (int4 and int2 are packed 2 and 4 to a byte)
_QUANTIZED_LOOKUPS = {"embedding_byte": 1, "embedding_4bit": 2, "embedding_2bit": 4}


def _weights_per_element(node: Node) -> int:
    """How many weights each stored element of a constant stands for, when a quantized op reads it as its weight:
    1 through a dequantize, 1/2/4 for a quantized embedding kernel's table; 0 when no such op reads it."""
    from np_optimizer.adapters.torch_private import op_schema

    for user in node.users:
        if _is_dequant(user.target) and user.args[0] is node:
            return 1
        schema = op_schema(user.target)
        name = schema.name.split("::")[-1] if schema is not None else ""
        if getattr(user.target, "namespace", "") == "quantized_decomposed" and name in _QUANTIZED_LOOKUPS \
                and user.args[0] is node:
            return _QUANTIZED_LOOKUPS[name]
    return 0


def _used_constants(ep: ExportedProgram) -> list[tuple[Node, str, Any]]:
    """(placeholder, kind, tensor) for every parameter/buffer/constant the graph reads.

    Why "reads": a PT2E program re-exported after convert_pt2e keeps its fp32 weights as unused parameters.
    """
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    out = []
    for node in ep.graph.nodes:
        spec = specs.get(node.name)
        if node.op != "placeholder" or spec is None or not node.users:
            continue
        kind = spec.kind.name
        if kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            t = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if t is not None:
                out.append((node, kind, t))
    return out


def count_params(ep: ExportedProgram) -> int:
    """Number of model weight elements the graph uses.

    Counted: every used PARAMETER (a tensor-subclass weight such as torchao's IntxUnpackedToInt8Tensor counts its
    logical elements), plus used buffers/constants that are the data input of a dequantize op (PT2E stores int8
    weights as buffers `_frozen_param*`) or the table of a quantized embedding kernel (`embedding_4bit`'s packed
    table counts two weights per byte). Not counted: unused state, BN running statistics, quantization
    scales/zero-points, other buffers. On a float program this equals `sum(p.numel() for p in model.parameters())`
    (minus parameters the graph does not read).
    """
    total = 0
    for node, kind, t in _used_constants(ep):
        per_element = 1 if kind == "PARAMETER" else _weights_per_element(node)
        total += int(t.numel()) * per_element
    return total


def _storage_bytes(t: torch.Tensor) -> int:
    """Bytes actually stored: a wrapper subclass is measured by its inner tensors (`.nbytes` of torchao's
    IntxUnpackedToInt8Tensor reports the fp32 outer size)."""
    from np_optimizer.adapters.torch_private import is_traceable_wrapper_subclass

    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()
        return sum(_storage_bytes(getattr(t, n)) for n in names)
    return int(t.numel() * t.element_size())


def weight_bytes(ep: ExportedProgram) -> int:
    """Bytes of all constant tensors the graph reads (weights, biases, quant scales/zero-points, BN statistics), as
    stored: int8 weights 1 byte/element (torchao int4 and graph_quantize's int4 embedding tables are stored unpacked
    in int8, so also 1 byte; ExecuTorch packs the tables two to a byte when it lowers them), float32 4.
    Unused state is excluded (`remove_dead_code` drops it)."""
    seen: set[int] = set()
    total = 0
    for _, _, t in _used_constants(ep):
        if id(t) not in seen:
            seen.add(id(t))
            total += _storage_bytes(t)
    return total
