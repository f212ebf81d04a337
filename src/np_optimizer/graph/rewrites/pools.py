"""Target rewrites of pooling and means (graph/rewrites/): the Ethos-U55's average-pool limits, and the forms of an
average pool or a mean XNNPACK's partitioner refuses. torch is imported inside functions only."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, cast

from np_optimizer.graph.edit import ProgramEdit, aten_op, erase_if_dead, meta_val, node_arg, refresh_meta
from np_optimizer.graph.passes import PassResult
from np_optimizer.graph.rewrites import Rewrite, Target, pair, register_rewrite, replacement_meta, touched_layers

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["avg_pool_as_mean", "avg_pool_for_xnnpack", "mean_keepdim"]


# avg_pool_as_mean


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
    kernel = pair(node.args[1], None)
    stride = pair(node_arg(node, 2, "stride", None), kernel)
    padding = pair(node_arg(node, 3, "padding", 0), 0)
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
    kernel = pair(node.args[1], None)
    stride = pair(node_arg(node, 2, "stride", None), kernel)
    padding = pair(node_arg(node, 3, "padding", 0), 0)
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
                    replacement_meta(node, value)
            if windows.out == (1, 1):
                mean = ed.graph.call_function(torch.ops.aten.mean.dim, (value, dims, True))
            else:
                mean = ed.graph.call_function(torch.ops.aten.adaptive_avg_pool2d.default, (value, list(windows.out)))
            replacement_meta(node, mean)
        mean.meta["val"] = node.meta["val"]  # the same value: a rewrite of a later pool of the chain reads it
        node.replace_all_uses_with(mean)
        replaced.append(node)
    return _finished(ep, ed, replaced)


def _finished(ep: ExportedProgram, ed: ProgramEdit, replaced: list[Node]) -> PassResult:
    """Every rewrite's end: the program unchanged when nothing was replaced, else the replaced nodes (and the inputs
    only they read) erased, values propagated again and the program rebuilt, naming the layers it touched."""
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
            replacement_meta(node, new)
        view.meta["val"] = node.meta["val"]  # the same value: a rewrite of a later pool of the chain reads it
        node.replace_all_uses_with(view)
        replaced.append(node)
    return _finished(ep, ed, replaced)


# avg_pool_for_xnnpack


def _floor_size(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def avg_pool_for_xnnpack(ep: ExportedProgram, target: Target) -> PassResult:
    """An average pool in the two forms XNNPACK refuses, written in one it takes: ceil_mode=True where ceil mode
    adds no window (the output size is the same rounded down) becomes ceil_mode=False; padding counted in the average
    (count_include_pad=True, the default, with padding) becomes a zero pad (constant_pad_nd) and a pool without
    padding, whose every window then holds kernel_h x kernel_w values, the divisor the padded pool used.

    Why: XNNPACK's AvgPoolingConfig refuses both ("ceil mode is not supported", "zero-padding in the averaging
    calculation is not supported") and the pool runs on the portable CPU kernel (the README's host example: 96% of the
    time). A ceil-mode pool that does add a window at the edge is left alone (its last window's divisor differs).
    XNNPACK's backend lists it; `target` is not read.
    """
    import torch

    ed = ProgramEdit(ep)
    changed: list[Node] = []
    for node in list(ed.graph.nodes):
        if node.op != "call_function" or node.target != aten_op("avg_pool2d.default"):
            continue
        x, out = meta_val(node.args[0]), node.meta.get("val")
        if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or \
                node_arg(node, 6, "divisor_override") is not None:
            continue
        kernel = pair(node.args[1], None)
        stride = pair(node_arg(node, 2, "stride", None), kernel)
        padding = pair(node_arg(node, 3, "padding", 0), 0)
        ceil_mode = bool(node_arg(node, 4, "ceil_mode", False))
        include_pad = bool(node_arg(node, 5, "count_include_pad", True))
        floors = tuple(_floor_size(int(x.shape[-2 + i]), kernel[i], stride[i], padding[i]) for i in range(2))
        if ceil_mode and floors != tuple(int(s) for s in out.shape[-2:]):
            continue  # ceil mode adds a window
        if not ceil_mode and not (include_pad and any(padding)):
            continue  # XNNPACK takes it
        value = cast("Node", node.args[0])
        if include_pad and any(padding):
            with ed.graph.inserting_before(node):
                pads = [padding[1], padding[1], padding[0], padding[0]]  # last dim first
                value = ed.graph.call_function(torch.ops.aten.constant_pad_nd.default, (value, pads, 0.0))
            replacement_meta(node, value)
            padding = (0, 0)
        with ed.graph.inserting_before(node):
            pool = ed.graph.call_function(torch.ops.aten.avg_pool2d.default,
                                          (value, list(kernel), list(stride), list(padding), False, include_pad))
        replacement_meta(node, pool)
        pool.meta["val"] = node.meta["val"]  # the same value: a rewrite of a later pool of the chain reads it
        node.replace_all_uses_with(pool)
        changed.append(node)
    return _finished(ep, ed, changed)


# Run order: as registered. The pool rewrite first: its mean is never one mean_keepdim rewrites (keepdim=True).
register_rewrite(Rewrite("avg_pool_as_mean", avg_pool_as_mean,
                 r"(?i)avgpool2d (with padding needs kernel dims|needs stride|needs kernel_y)",
                 "a pool without padding whose windows do not overlap"))
register_rewrite(Rewrite("avg_pool_for_xnnpack", avg_pool_for_xnnpack,
                 r"(?i)^(ceil mode is not supported|zero-padding in the averaging calculation is not supported)$",
                 "a ceil-mode pool whose ceil mode adds no window, and a pool whose padding counts in the average"))
register_rewrite(Rewrite("mean_keepdim", mean_keepdim, r"(?i)mean\.dim only supports keepdim=true",
                 "a mean over H and W of a 4-D tensor"))
