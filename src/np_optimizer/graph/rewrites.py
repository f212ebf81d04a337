"""Target rewrites: graph_optimize passes that replace a pattern the run's target refuses with an equivalent it takes,
so that a layer the partitioner would leave on the CPU lowers into the delegate.

A rewrite has the form `rewrite(ep, target) -> PassResult` (graph/passes.py's contract: the input never mutated, an
unchanged program returned as itself) and applies only where the target would refuse the pattern: a backend lists the
rewrites for its partitioner (Backend.rewrites), and each one mirrors that partitioner's own support check
(ExecuTorch's backends/arm/operator_support, backends/xnnpack/partition/config) down to the target profile, so a
pattern the target takes is left as it is. The graph_optimize step runs them after the generic passes and checks
their outputs with the same tolerance. Each entry also names the partitioner reasons it answers (`fixes`, a regular
expression), so that the reason line of a run without graph_optimize can name the rewrite that would fix a layer.

Why a registry of their own (registry.Registry, "graph rewrite"), not entries of passes.PASSES: they are another
extension point, chosen by the target and given it, and the reason line looks them up by the reasons they fix.
torch is imported inside functions only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from np_optimizer.graph.edit import ProgramEdit, aten_op, erase_if_dead, meta_val, node_arg, refresh_meta
from np_optimizer.graph.passes import PassResult
from np_optimizer.registry import Registry

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["Target", "Rewrite", "REWRITES", "rewrites_of", "rewrite_for", "touched_layers", "avg_pool_as_mean", "mean_keepdim",
           "drop_constant_attention_mask"]


class Target(NamedTuple):
    """What a rewrite needs of the run's device besides its backend (which chooses the rewrites: Backend.rewrites):
    the NPU's target profile ("ethos-u55-128", "ethos-u85-256"), None for a CPU."""

    npu: str | None = None

    @property
    def is_u55(self) -> bool:
        return (self.npu or "").startswith("ethos-u55")


@dataclass(frozen=True)
class Rewrite:
    """A registered rewrite: its name (job.json's `changes.passes[].pass`), the function, the partitioner reasons it
    answers (a regular expression) and the layers it can change, in words (the reason line's advice says it)."""

    name: str
    run: Callable[[ExportedProgram, Target], PassResult]
    fixes: str
    scope: str


REWRITES: Registry[Rewrite] = Registry("graph rewrite")


def _register(rewrite: Rewrite) -> Rewrite:
    return REWRITES.register(rewrite.name, rewrite)


def rewrites_of(names: tuple[str, ...]) -> list[Rewrite]:
    """The registered rewrites a backend lists (Backend.rewrites), in registration order."""
    return [r for r in REWRITES.entries() if r.name in names]


def rewrite_for(reason: str) -> Rewrite | None:
    """The rewrite that answers a partitioner's reason, if one does."""
    return next((r for r in REWRITES.entries() if re.search(r.fixes, reason)), None)


def touched_layers(nodes: list[Node]) -> list[str]:
    """The module paths (nn_module_stack's innermost entry) of the nodes a rewrite replaced, in order, once each."""
    out: list[str] = []
    for node in nodes:
        stack = node.meta.get("nn_module_stack") or {}
        path = str(list(stack.values())[-1][0]) if stack else ""
        # an op of the model's own forward: named as the per-layer views name it (records/layers.py's LayerKey)
        path = path or f"(model).{getattr(node.target, '_opname', node.name)}"
        if path not in out:
            out.append(path)
    return out


def _replacement_meta(node: Node, new: Node) -> None:
    """The replaced node's provenance (module stack, source, stack trace) on a node that replaces it, so the layer
    keeps its module path in the per-layer views; meta['val'] comes from refresh_meta."""
    for key in ("nn_module_stack", "source_fn_stack", "stack_trace", "from_node", "torch_fn"):
        if key in node.meta:
            new.meta[key] = node.meta[key]


# avg_pool_as_mean


def _pair(value: Any, default: Any) -> tuple[int, int]:
    value = default if value in (None, [], ()) else value
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return (int(items[0]), int(items[-1]))


def _u55_post_pad(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """The TOSA post-padding the Arm lowering gives a pool (operators/operator_validation_utils.py's
    adjust_pooling_pad_if_needed): not 0 when the kernel does not tile the map."""
    numerator = size - kernel + 2 * pad
    if ceil_mode:
        out = (numerator + stride - 1) // stride + 1
        out -= 1 if (out - 1) * stride >= size + pad else 0
    else:
        out = numerator // stride + 1
    return (out - 1) * stride - size + kernel - pad


def _u55_refuses_pool(shape: list[int], kernel: tuple[int, int], stride: tuple[int, int],
                      padding: tuple[int, int], ceil_mode: bool) -> bool:
    """The kernel and stride limits of the Arm backend's U55 check (operator_support/pool_2d_support.py,
    AvgPool2dSupported): a kernel dim over 8 with any padding, kernel_y over 256 or kernel_x*kernel_y over 65536, a
    stride over 3. (Its N == 1 limit is no kernel matter: a mean does not lift it, so it is not counted.)"""
    posts = [_u55_post_pad(shape[-2 + i], kernel[i], stride[i], padding[i], ceil_mode) for i in range(2)]
    padded = any(padding) or any(posts)
    if any(k > 8 for k in kernel) and padded:
        return True
    if not (1 <= kernel[0] * kernel[1] <= 65536 and 1 <= kernel[1] <= 256):
        return True
    return not all(1 <= s <= 3 for s in stride)


class _Windows(NamedTuple):
    """Where an average pool's windows lie: each (rows, columns) `kernel` and the (rows, columns) of outputs, the
    windows side by side from the map's top left corner, each read whole."""

    kernel: tuple[int, int]
    out: tuple[int, int]


def _pool_windows(node: Node) -> _Windows | None:
    """The windows of an avg_pool2d that is a mean of each window: no padding (so neither count_include_pad nor a
    partial window at the edge changes a divisor), no divisor_override, and either one output position or windows that
    do not overlap (stride == kernel); None otherwise."""
    import torch

    x, out = meta_val(node.args[0]), node.meta.get("val")
    if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or x.dim() not in (3, 4):
        return None
    kernel = _pair(node.args[1], None)
    stride = _pair(node_arg(node, 2, "stride", None), kernel)
    padding = _pair(node_arg(node, 3, "padding", 0), 0)
    if any(padding) or node_arg(node, 6, "divisor_override") is not None:
        return None
    outs = (int(out.shape[-2]), int(out.shape[-1]))
    whole = all(o * k <= int(size) for o, k, size in zip(outs, kernel, x.shape[-2:]))  # ceil mode: no partial window
    if not whole or (outs != (1, 1) and stride != kernel):
        return None
    return _Windows(kernel, outs)


def _target_refuses_pool(node: Node, target: Target) -> bool:
    """Whether the target leaves this avg_pool2d on the CPU where it would take the means of its windows: the U55's
    kernel and stride limits. The U85 takes every such pool; XNNPACK (whose backend does not list this rewrite)
    refuses ceil mode and padding counted in the average, which the rewrite would not lift where they change the
    numbers."""
    if not target.is_u55:
        return False
    x = meta_val(node.args[0])
    kernel = _pair(node.args[1], None)
    stride = _pair(node_arg(node, 2, "stride", None), kernel)
    padding = _pair(node_arg(node, 3, "padding", 0), 0)
    ceil_mode = bool(node_arg(node, 4, "ceil_mode", False))
    return _u55_refuses_pool(list(x.shape), kernel, stride, padding, ceil_mode)


def avg_pool_as_mean(ep: ExportedProgram, target: Target) -> PassResult:
    """An average pool without padding whose windows do not overlap, written as the mean of each window: a slice of
    the rows and columns the windows read, then a mean over them (one output position: `mean`, keepdim) or one mean
    per window (several: `adaptive_avg_pool2d` to the pool's output size, whose windows are then the pool's own).

    Why: on the Ethos-U55 a pool whose kernel does not tile its map (the Arm lowering pads the leftover rows) is
    refused for a kernel dim over 8, and one that does tile it for a stride over 3 (the stride of windows that do not
    overlap is their kernel). The Arm backend lowers a mean as a sum and a multiply, and an adaptive pool over a map
    its output size divides as one pool per window, neither with those limits (both checked on a U55 lowering:
    tests/graph/test_rewrites.py), so the layer stays on the NPU. Applied only where the target refuses the pool
    (`_target_refuses_pool`).
    """
    import torch

    ed = ProgramEdit(ep)
    replaced: list[Node] = []
    for node in list(ed.graph.nodes):
        if node.op != "call_function" or node.target != aten_op("avg_pool2d.default"):
            continue
        windows = _pool_windows(node)
        if windows is None or not _target_refuses_pool(node, target):
            continue
        x = cast("Node", node.args[0])
        shape = list(meta_val(x).shape)
        dims = [len(shape) - 2, len(shape) - 1]
        with ed.graph.inserting_before(node):
            value = x
            for dim, k, o in zip(dims, windows.kernel, windows.out):
                if k * o < shape[dim]:  # the rows (columns) no window reads
                    value = ed.graph.call_function(torch.ops.aten.slice.Tensor, (value, dim, 0, k * o))
                    _replacement_meta(node, value)
            if windows.out == (1, 1):
                mean = ed.graph.call_function(torch.ops.aten.mean.dim, (value, dims, True))
            else:
                mean = ed.graph.call_function(torch.ops.aten.adaptive_avg_pool2d.default, (value, list(windows.out)))
            _replacement_meta(node, mean)
        node.replace_all_uses_with(mean)
        replaced.append(node)
    if not replaced:
        return PassResult(ep, False)
    erase_if_dead(ed.graph, replaced)
    refresh_meta(ed)
    return PassResult(ed.finish(), True, tuple(touched_layers(replaced)))


# mean_keepdim


def _xnnpack_refuses_mean(node: Node) -> bool:
    """XNNPACK's MeanDimConfig takes a mean over the two innermost dims of a 4-D tensor with keepdim=True and no
    dtype: a mean that meets all but keepdim is the pattern."""
    import torch

    x = meta_val(node.args[0])
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or node.kwargs.get("dtype") is not None:
        return False
    dims = node.args[1] if len(node.args) > 1 else None
    if not isinstance(dims, (list, tuple)) or sorted(int(d) % 4 for d in dims) != [2, 3]:
        return False
    return not (len(node.args) > 2 and bool(node.args[2]))


def mean_keepdim(ep: ExportedProgram, target: Target) -> PassResult:
    """A mean over H and W without keepdim (`x.mean((2, 3))`, the usual global pooling before a classifier), written as
    the mean with keepdim=True and a view to the shape the model had.

    Why: XNNPACK lowers this mean as its global average pooling, which keeps the reduced dims; without keepdim its
    partitioner refuses it ("mean.dim only supports keepdim=True") and the mean runs on the portable CPU kernel.
    XNNPACK's backend lists it (the Arm backend takes either form: it decomposes a mean into a sum and a multiply);
    `target` is not read.
    """
    import torch

    ed = ProgramEdit(ep)
    replaced: list[Node] = []
    for node in list(ed.graph.nodes):
        if node.op != "call_function" or node.target != aten_op("mean.dim") or not _xnnpack_refuses_mean(node):
            continue
        shape = [int(s) for s in node.meta["val"].shape]
        with ed.graph.inserting_before(node):
            kept = ed.graph.call_function(torch.ops.aten.mean.dim, (node.args[0], list(node.args[1]), True))
            view = ed.graph.call_function(torch.ops.aten.view.default, (kept, shape))
        for new in (kept, view):
            _replacement_meta(node, new)
        node.replace_all_uses_with(view)
        replaced.append(node)
    if not replaced:
        return PassResult(ep, False)
    erase_if_dead(ed.graph, replaced)
    refresh_meta(ed)
    return PassResult(ed.finish(), True, tuple(touched_layers(replaced)))


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


# Run order: as registered. The pool rewrite first: its mean is never one mean_keepdim rewrites (keepdim=True).
_register(Rewrite("avg_pool_as_mean", avg_pool_as_mean,
                  r"(?i)avgpool2d (with padding needs kernel dims|needs stride|needs kernel_y)",
                  "a pool without padding whose windows do not overlap"))
_register(Rewrite("drop_constant_attention_mask", drop_constant_attention_mask,
                  r"torch\.bool (input|output)|^no XNNPACK kernel for aten\.(ge|where|logical_not|any)",
                  "an attention mask the model builds from no input that masks nothing"))
_register(Rewrite("mean_keepdim", mean_keepdim, r"(?i)mean\.dim only supports keepdim=true",
                  "a mean over H and W of a 4-D tensor"))
