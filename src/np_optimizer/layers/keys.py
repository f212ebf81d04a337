"""The layer key: module path + class + op family, from a node's `nn_module_stack`, without torch.

Why the last entry of the stack: it is the innermost module that called the op (`block.expand`, `Conv2d`), the
name the user wrote in their model; ExecuTorch's intermediate-output taps key their outputs the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from np_optimizer.records.layers import ROOT, LayerKey

__all__ = ["LayerKey", "ROOT", "OVERHEAD_FAMILIES", "op_family", "module_of", "is_overhead", "assign_keys"]


# Ops that move or re-encode data rather than compute: the compiler inserts them around the layers.
OVERHEAD_FAMILIES = frozenset({
    "quantize_per_tensor", "quantize_per_channel", "dequantize_per_tensor", "dequantize_per_channel", "rescale",
    "transpose", "permute", "permute_copy", "view", "view_copy", "reshape", "squeeze", "squeeze_copy", "unsqueeze",
    "unsqueeze_copy", "expand_copy", "clone", "_clone_dim_order", "_to_copy", "_to_dim_order_copy", "memorycopy",
    "constant_pad_nd", "pad", "identity", "cast",
})


_SUFFIX = re.compile(r"(_\d+)+$")


def op_family(op: str) -> str:
    """'aten.convolution.default' -> 'convolution'; 'tosa.CONV2D.default' -> 'conv2d'; 'Op.TRANSPOSE' -> 'transpose';
    a node name 'aten_sum_dim_int_list_1' -> 'sum'."""
    text = str(op)
    parts = text.split(".")
    if len(parts) >= 3:
        name = parts[-2]
    elif len(parts) == 2:
        name = parts[-1]
    else:
        name = _SUFFIX.sub("", text)
        for prefix in ("aten_", "tosa_", "quantized_decomposed_", "dim_order_ops_"):
            if name.startswith(prefix):
                name = name[len(prefix):].split("_default")[0]
                break
    return name.lower()


def module_of(stack: Any) -> tuple[str, str] | None:
    """(path, class short name) of the innermost module in an `nn_module_stack` (a dict of id -> (path, qualified
    class) as torch.export records it, lists after a JSON round trip); None when the node has no stack."""
    if not isinstance(stack, Mapping) or not stack:
        return None
    last = list(stack.values())[-1]
    if not isinstance(last, Sequence) or len(last) < 2:
        return None
    path, cls = str(last[0]), last[1]
    cls_name = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1].rstrip("'>")
    # torch.export's paths of nested calls can read "L__self__.block.expand" or "block.expand": keep the user's
    return path.removeprefix("L__self__.").removeprefix("L['self'].").replace("._modules['", ".").rstrip("']"), \
        cls_name


def is_overhead(family: str) -> bool:
    return family in OVERHEAD_FAMILIES


def _fn_family(torch_fn: Any) -> str | None:
    """The function the user called, from a node's `torch_fn` ('mean_1', 'method_descriptor.mean') -> 'mean'."""
    if isinstance(torch_fn, Sequence) and not isinstance(torch_fn, str) and len(torch_fn) == 2:
        kind, _, name = str(torch_fn[1]).rpartition(".")
        if kind.startswith("OpOverload"):  # an op inserted by a pass (quantize, dequantize): no user function
            return None
        return name.lower() or None
    return None


Op = tuple[str, str, Any, Sequence[str], Any]  # (id, op name, nn_module_stack, producer ids, torch_fn or None)


def assign_keys(ops: Iterable[Op], root_class: str = "model") -> dict[str, LayerKey]:
    """Keys for ops given in topological order as (id, op, nn_module_stack, producer ids, torch_fn).

    The family is the function the user called (`torch_fn`: conv2d, linear, mean) where the node records it, else
    the op's own family, so a mean lowered to sum + mul stays one `mean` layer.

    An op inside a module of the user's gets that module's key (its family is the module's first compute op, so one
    module is one layer). An overhead op with no module is attributed to its producer's key (the nearest keyed
    producer; the first consumer for ops before any layer, such as the input's quantize). Any other op of the model's
    own forward is keyed by its family at the root: `(model).mean`.
    """
    items = list(ops)
    own: dict[str, tuple[str, str] | None] = {i: module_of(stack) for i, _op, stack, _p, _f in items}
    families = {i: op_family(op) for i, op, _s, _p, _f in items}
    called = {i: _fn_family(fn) for i, _op, _s, _p, fn in items}
    module_family: dict[str, str] = {}
    for i, _op, _s, _p, _f in items:
        mod = own[i]
        if mod and mod[0] != ROOT and not is_overhead(families[i]):
            module_family.setdefault(mod[0], called[i] or families[i])
    keys: dict[str, LayerKey] = {}
    pending: list[str] = []
    for i, _op, _stack, producers, _fn in items:
        mod, family = own[i], families[i]
        if mod and mod[0] != ROOT:
            keys[i] = LayerKey(mod[0], mod[1], module_family.get(mod[0], family))
        elif not is_overhead(family) or not is_overhead(called[i] or family):
            keys[i] = LayerKey(ROOT, mod[1] if mod else root_class, called[i] or family)
        else:
            found = next((keys[p] for p in producers if p in keys), None)
            if found is not None:
                keys[i] = found
            else:
                pending.append(i)
                continue
        for waiting in pending:  # overhead before any layer (the input's quantize): the first layer after it
            keys[waiting] = keys[i]
        pending.clear()
    for waiting in pending:  # nothing keyed at all: the model itself
        keys[waiting] = LayerKey(ROOT, root_class, families[waiting])
    return keys
