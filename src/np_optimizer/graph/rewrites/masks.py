"""Target rewrites of attention masks (graph/rewrites/): a mask the model builds that masks nothing. torch is imported
inside functions only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from np_optimizer.graph.edit import ProgramEdit, aten_op, erase_if_dead, meta_val, node_arg
from np_optimizer.graph.passes import PassResult
from np_optimizer.graph.rewrites import Rewrite, Target, register_rewrite, touched_layers

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["drop_constant_attention_mask"]


# drop_constant_attention_mask


def _constant_value(node: Any, seen: dict[Any, Any]) -> Any:
    """The value of a node computed from no input, parameter or buffer (creation ops and literals only, the way a
    model builds a mask from `arange`), evaluated with torch; None when it reads anything else."""
    from torch.fx.node import map_arg

    from np_optimizer.graph.edit import foldable

    if not hasattr(node, "op"):
        return node
    if node in seen:
        return seen[node]
    value = None
    if node.op == "call_function" and foldable(node.target):
        inputs = {i: _constant_value(i, seen) for i in node.all_input_nodes}
        if all(v is not None for v in inputs.values()):
            args, kwargs = map_arg((node.args, node.kwargs), lambda n: inputs[n])
            value = node.target(*args, **kwargs)
    seen[node] = value
    return value


def _mask_changes_nothing(mask: Any) -> bool:
    """An attention mask that masks nothing: all True (boolean: attend everywhere) or all 0 (added to the scores)."""
    import torch

    if not isinstance(mask, torch.Tensor):
        return False
    return bool(mask.all()) if mask.dtype == torch.bool else bool((mask == 0).all())


def drop_constant_attention_mask(ep: ExportedProgram, target: Target) -> PassResult:
    """Drop the attention mask of scaled_dot_product_attention where the model computes it from no input and it masks
    nothing (the mask then dies with its ops).

    Why: a Hugging Face encoder called without an attention mask (ViT always; BERT with input ids only) still builds
    an all-True boolean mask from `arange` in its graph. The Ethos-U55 has no boolean tensors ("Had torch.bool
    output that is not supported by TOSA-...+u55") and leaves its ge, expand and where on the CPU; XNNPACK has no
    kernel for them and they run on the portable kernels. Attention with a mask that masks nothing is attention
    without one. `target` is not read: the backends that list the rewrite run it.
    """
    import torch

    ed = ProgramEdit(ep)
    sdpa = aten_op("scaled_dot_product_attention.default")
    changed: list[Node] = []
    seen: dict[Any, Any] = {}
    for node in list(ed.graph.nodes):
        if node.op != "call_function" or node.target != sdpa:
            continue
        mask = node_arg(node, 3, "attn_mask")
        if mask is None or not hasattr(mask, "op"):
            continue
        with torch.no_grad():
            value = _constant_value(mask, seen)
        if not _mask_changes_nothing(value) or tuple(value.shape) != tuple(meta_val(mask).shape):
            continue
        if len(node.args) > 3:
            node.update_arg(3, None)
        else:
            node.update_kwarg("attn_mask", None)
        changed.append(node)
    if not changed:
        return PassResult(ep, False)
    erase_if_dead(ed.graph, [n for n, v in seen.items() if v is not None])  # the mask's ops (no side effects)
    return PassResult(ed.finish(), True, tuple(touched_layers(changed)))


register_rewrite(Rewrite("drop_constant_attention_mask", drop_constant_attention_mask,
                 r"torch\.bool (input|output)|^no XNNPACK kernel for aten\.(arange|ge)\b",
                 "an attention mask the model builds from no input that masks nothing"))
