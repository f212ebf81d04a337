"""Output-preserving graph passes on torch.export programs (ATen dialect, as saved in .pt2 files).

Every pass has the form `pass(ep) -> PassResult(ep, changed)`: the input program is never mutated, an unchanged
program is returned as the same object, a changed one is rebuilt through `ProgramEdit.finish()` (torch's verifier
re-checks it), and parameters/buffers a pass makes unused leave the program state. Why our own passes: executorch's
passes for these jobs match Edge-dialect ops (`exir_ops.edge.*`) and are silent no-ops on ATen programs (some still
report `modified=True`), while np keeps ATen `.pt2` checkpoints. Tolerances the tests hold them to: structural passes
(cancel_permutes, remove_redundant_copies, remove_dead_code) are bit-identical; numeric ones (fuse_conv_bn,
fold_constants) stay within 1e-5 x max|reference output|.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from np_optimizer.graph.edit import (
    ProgramEdit,
    alias_root,
    aten_op,
    aten_ops,
    erase_if_dead,
    foldable,
    is_layout_op,
    layout_kept,
    meta_val,
    node_arg,
    perm_of,
    refresh_meta,
    written_in_place,
)

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["PassResult", "PASSES", "fold_constants", "fuse_conv_bn", "cancel_permutes", "remove_redundant_copies",
           "remove_dead_code"]


class PassResult(NamedTuple):
    """What every pass returns: the program (the input object itself when unchanged), whether the graph changed, and
    the layers (module paths) it changed, where the pass names them (graph/rewrites/'s do: job.json lists them)."""

    ep: ExportedProgram
    changed: bool
    layers: tuple[str, ...] = ()


# fuse_conv_bn

_CONV = ("conv1d.default", "conv2d.default", "conv3d.default", "conv1d.padding", "conv2d.padding", "conv3d.padding",
         "convolution.default")
_CONV_T = ("conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input")


def _conv_is_transposed(conv: Node) -> bool | None:
    """False/True for a plain/transposed conv BN can fuse into; None when unsupported."""
    if conv.target in aten_ops(*_CONV):
        if conv.target == aten_op("convolution.default"):
            transposed, groups = bool(conv.args[6]), conv.args[8]
            # Grouped transposed weights are (C_in, C_out/groups, ...): a per-channel scale is not a reshape.
            return None if transposed and groups != 1 else transposed
        return False
    if conv.target in aten_ops(*_CONV_T):
        return True if node_arg(conv, 6, "groups", 1) == 1 else None
    return None


def _bn_eps(bn: Node) -> float | None:
    """eps of an inference-mode batch norm node; None for training mode or other ops."""
    if bn.target == aten_op("_native_batch_norm_legit_no_training.default"):
        return float(bn.args[6])  # type: ignore[arg-type]
    if bn.target in aten_ops("batch_norm.default", "native_batch_norm.default"):
        return None if bn.args[5] else float(bn.args[7])  # type: ignore[arg-type]
    return None


def _bn_output(bn: Node) -> Node | None:
    """The node carrying the normalized tensor: bn itself, or its only getitem(..., 0)."""
    if bn.target in aten_ops("batch_norm.default"):
        return bn
    users = list(bn.users)
    if len(users) == 1 and users[0].target is operator.getitem and users[0].args[1] == 0:
        return users[0]
    return None


class _ConvBN(NamedTuple):
    conv: Node
    bn: Node
    out: Node  # the node carrying BN's result (bn itself or its getitem 0)
    bn_args: list[Any]  # BN weight, bias, running_mean, running_var (nodes or None)
    eps: float
    transposed: bool


def _match_conv_bn(ed: ProgramEdit, conv: Node) -> _ConvBN | None:
    """conv -> inference BN where the conv feeds only the BN and every tensor is a constant."""
    if conv.op != "call_function" or len(conv.users) != 1:
        return None
    transposed, bn = _conv_is_transposed(conv), next(iter(conv.users))
    eps = _bn_eps(bn)
    if transposed is None or eps is None or bn.args[0] is not conv:
        return None
    out = _bn_output(bn)
    bn_args = [bn.args[i] for i in range(1, 5)]
    bias = node_arg(conv, 2, "bias")
    consts_ok = (ed.const_value(conv.args[1]) is not None
                 and (bias is None or ed.const_value(bias) is not None)
                 and all(a is None or ed.const_value(a) is not None for a in bn_args[:2])
                 and all(ed.const_value(a) is not None for a in bn_args[2:]))
    return _ConvBN(conv, bn, out, bn_args, eps, transposed) if out is not None and consts_ok else None


def _fused_weights(ed: ProgramEdit, m: _ConvBN) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused (weight, bias), computed in float64 and cast back to the conv's dtypes, so the fused weights carry less
    rounding than running conv and BN separately did."""
    import torch

    w, b = ed.const_value(m.conv.args[1]), ed.const_value(node_arg(m.conv, 2, "bias"))
    assert w is not None
    bn_w, bn_b, mean, var = (ed.const_value(a) for a in m.bn_args)

    def f64(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.detach().to(torch.float64)

    # w is asserted above and _match_conv_bn checked that mean and var are constants: f64 returns tensors for them
    new_w, new_b = torch.nn.utils.fusion.fuse_conv_bn_weights(
        cast(torch.Tensor, f64(w)), f64(b), cast(torch.Tensor, f64(mean)), cast(torch.Tensor, f64(var)), m.eps,
        f64(bn_w), f64(bn_b), transpose=m.transposed)
    return new_w.detach().to(w.dtype), new_b.detach().to(b.dtype if b is not None else w.dtype)


def _write_conv_params(ed: ProgramEdit, conv: Node, new_w: torch.Tensor, new_b: torch.Tensor) -> None:
    """Store the fused tensors: in place when only this conv reads them (names such as `c1.weight` are kept),
    otherwise as a new parameter `<weight>_bn_fused`; a conv without bias gets `<prefix>.bias`."""
    w_node, b_node = cast("Node", conv.args[1]), node_arg(conv, 2, "bias")  # _match_conv_bn: a constant's Node
    assert hasattr(w_node, "users")
    w_fqn = ed.target(w_node)
    if len(w_node.users) == 1:
        ed.set_const_value(w_node, new_w)
    else:
        conv.update_arg(1, ed.add_const(w_fqn + "_bn_fused", new_w, "PARAMETER"))
    if b_node is not None and len(b_node.users) == 1:
        ed.set_const_value(b_node, new_b)
        return
    new_b_node = ed.add_const(w_fqn.rsplit(".", 1)[0] + ".bias", new_b, "PARAMETER")
    if len(conv.args) > 2:
        conv.update_arg(2, new_b_node)
    elif "bias" in conv.kwargs:
        conv.update_kwarg("bias", new_b_node)
    else:
        conv.args = (conv.args[0], conv.args[1], new_b_node)


def _remove_bn(ed: ProgramEdit, m: _ConvBN) -> None:
    """Route BN's consumers to the conv; delete BN and its state, incl. num_batches_tracked (an eval graph never
    reads it)."""
    m.out.replace_all_uses_with(m.conv)
    erase_if_dead(ed.graph, {m.bn, m.out})
    prefix = ed.target(m.bn_args[2]).rsplit(".", 1)[0]
    nbt = [n for n in ed.graph.nodes if n.op == "placeholder"
           and getattr(ed.specs.get(n.name), "target", None) == prefix + ".num_batches_tracked"]
    ed.drop_unused_inputs([a for a in m.bn_args if a is not None] + nbt)


def fuse_conv_bn(ep: ExportedProgram) -> PassResult:
    """Fold an inference batch norm into the convolution that feeds it.

    Why: BN after a conv is a per-channel affine map, so it can live in the conv's weight and bias; this removes one
    op per block and the BN's tensors from the saved program. Handles conv1d/2d/3d, convolution (also transposed,
    groups=1) and conv_transpose*, followed by batch_norm (export's default IR) or
    _native_batch_norm_legit_no_training (after run_decompositions). Not fused: a conv with other users, or anything
    sitting between conv and BN.
    """
    ed = ProgramEdit(ep)
    fused = 0
    for conv in list(ed.graph.nodes):
        if conv.graph is not ed.graph or (m := _match_conv_bn(ed, conv)) is None:
            continue
        new_w, new_b = _fused_weights(ed, m)
        _write_conv_params(ed, conv, new_w, new_b)
        _remove_bn(ed, m)
        fused += 1
    return PassResult(ed.finish() if fused else ep, fused > 0)


# fold_constants


def _fold_point(node: Node, value: dict[Node, Any]) -> Node:
    """Where to cut a folded chain: below its trailing view/permute/copy ops, so `permute(w * 2)` becomes
    `permute(<const>)`.

    Why: backends pattern-match a weight's layout ops (XNNPACK's ConvertToLinearPass expects permute(weight) ->
    addmm and fails if the permuted weight is folded), and folding a pure view only duplicates storage.
    """
    while is_layout_op(node.target) and node.args and \
            getattr(node.args[0], "op", None) == "call_function" and node.args[0] in value:
        node = node.args[0]  # type: ignore[assignment]
    return node


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def fold_constants(ep: ExportedProgram) -> PassResult:
    """Evaluate subgraphs that read only parameters/buffers/constants once, and store their results as state.

    Why: e.g. `self.w.t() * 2` in forward would otherwise be recomputed at every inference. Rules: aten ops only
    (see `foldable`); a buffer updated in place is not a constant; a result is never stored when it is larger than
    the constants it reads (an expand would grow the file), comes from creation ops alone (zeros, arange) or is a
    graph output. Results are stored contiguous, as PARAMETER when derived from a parameter (so params counts stay
    the same), else as CONSTANT_TENSOR. Not bit-identical: a contiguous folded weight may take another BLAS path.
    """
    import torch
    from torch.fx.node import map_arg

    ed = ProgramEdit(ep)
    value: dict[Node, Any] = {}  # node -> folded value
    sources: dict[Node, set[Node]] = {}  # node -> constant placeholders it reads
    for node in ed.graph.nodes:
        if node.op == "placeholder" and (v := ed.const_value(node)) is not None:
            value[node], sources[node] = v, {node}
        elif node.op == "call_function" and foldable(node.target) and \
                all(i in value for i in node.all_input_nodes):
            args, kwargs = map_arg((node.args, node.kwargs), lambda n: value[n])
            with torch.no_grad():
                value[node] = node.target(*args, **kwargs)
            sources[node] = set().union(*(sources[i] for i in node.all_input_nodes))

    output = ed.graph.output_node()
    folded: list[Node] = []
    points = {_fold_point(n, value) for n in value
              if n.op == "call_function" and any(u not in value for u in n.users)}
    for node in [n for n in ed.graph.nodes if n in points]:  # graph order: stable names
        v = value[node]
        if is_layout_op(node.target) or not isinstance(v, torch.Tensor) or output in node.users:
            continue
        src_bytes = sum(_nbytes(value[s]) for s in sources[node])
        if not sources[node] or _nbytes(v) > src_bytes:
            continue  # pure creation op or a result bigger than its inputs
        kinds = {ed.kind(s) for s in sources[node]}
        kind = "PARAMETER" if "PARAMETER" in kinds and v.is_floating_point() else "CONSTANT_TENSOR"
        first = min(sources[node], key=lambda s: s.name)
        new = ed.add_const(ed.target(first) + "_folded", v.detach().clone().contiguous(), kind)
        node.replace_all_uses_with(new)
        folded.append(node)
    if not folded:
        return PassResult(ep, False)
    erase_if_dead(ed.graph, [n for n in value if n.op == "call_function"])
    ed.drop_unused_inputs([n for n in value if n.op == "placeholder"])
    refresh_meta(ed)  # contiguous folded constants may change downstream strides
    return PassResult(ed.finish(), True)


# remove_dead_code


def _is_impure(node: Node) -> bool:
    """fx's purity test plus every aten assert (fx 2.13 lists _assert_async.msg but not .default, and deletes the
    latter) and any op with a mutable schema (in-place ops such as detach_)."""
    schema = getattr(node.target, "_schema", None)
    if schema is not None and (schema.name.startswith("aten::_assert") or schema.is_mutable):
        return True
    return bool(node.is_impure())


def remove_dead_code(ep: ExportedProgram) -> PassResult:
    """Remove nodes whose results nobody uses, then parameters/buffers/constants nobody reads.

    Why: export keeps computed-but-unused branches, and a PT2E program re-exported after convert_pt2e still carries
    its original fp32 weights as unused parameters (they inflate the .pt2). Side effects are kept (`_is_impure`).
    """
    ed = ProgramEdit(ep)
    before = sum(1 for n in ed.graph.nodes if n.op == "call_function")
    ed.graph.eliminate_dead_code(is_impure_node=_is_impure)
    removed = before - sum(1 for n in ed.graph.nodes if n.op == "call_function")
    removed += ed.drop_unused_inputs()
    return PassResult(ed.finish() if removed else ep, removed > 0)


# remove_redundant_copies


def _redundant_copy_input(node: Node) -> Node | None:
    """The node whose value `node` merely copies (same values, dtype, shape, device and strides), else None."""
    import torch

    if node.op != "call_function" or not node.args or not hasattr(node.args[0], "meta"):
        return None
    src, t = cast("Node", node.args[0]), node.target  # an argument with `.meta` is a Node
    sv, ov = meta_val(src), node.meta.get("val")
    if not isinstance(sv, torch.Tensor) or not isinstance(ov, torch.Tensor):
        return None
    same = sv.dtype == ov.dtype and sv.shape == ov.shape and sv.device == ov.device
    if t == aten_op("clone.default"):
        return src if same and layout_kept(sv, node.kwargs.get("memory_format")) else None
    if t == aten_op("contiguous.default"):  # its memory_format defaults to contiguous_format, not preserve_format
        fmt = node.kwargs.get("memory_format", torch.contiguous_format)
        return src if same and layout_kept(sv, fmt) else None
    if t in aten_ops("_to_copy.default", "to.dtype", "to.dtype_layout", "to.device", "to.other"):
        ok = same and sv.layout == ov.layout and layout_kept(sv, node.kwargs.get("memory_format"))
        return src if ok else None
    if t in aten_ops("alias.default", "detach.default", "lift_fresh_copy.default"):
        return src if same else None
    if t == aten_op("copy.default"):  # functional copy(dst, src): src's values in dst's form
        other = node.args[1]
        ov2 = meta_val(other) if hasattr(other, "meta") else None
        if isinstance(ov2, torch.Tensor) and ov2.dtype == ov.dtype and ov2.shape == ov.shape and \
                layout_kept(ov2, None):
            return other  # type: ignore[return-value]
    return None


def remove_redundant_copies(ep: ExportedProgram) -> PassResult:
    """Drop clone/contiguous/_to_copy/to/alias/detach/lift_fresh_copy/copy nodes that change neither values nor
    layout.

    Why: each is a full tensor copy at run time. Kept: a copy from a placeholder straight to an output (the output
    would alias an input or a weight), and a copy whose result or source is later updated in place (it shields one
    side from the other's update).
    """
    ed = ProgramEdit(ep)
    output = ed.graph.output_node()
    removed = []
    for node in list(ed.graph.nodes):
        src = _redundant_copy_input(node)
        if src is None or (src.op == "placeholder" and output in node.users):
            continue
        if written_in_place(node) or written_in_place(alias_root(src)):
            continue
        node.replace_all_uses_with(src)
        removed.append(node)
    n = erase_if_dead(ed.graph, removed)
    return PassResult(ed.finish() if n else ep, n > 0)


# cancel_permutes


def cancel_permutes(ep: ExportedProgram) -> PassResult:
    """Compose chains of permute/transpose/t (also *_copy); remove a chain that composes to the identity.

    Why: layout shuffles (e.g. NCHW->NHWC->NCHW) each move the whole tensor at run time. A non-identity chain becomes
    one permute only when the inner op has no other user, so the node count never grows. Does not look through
    view/reshape.
    """
    import torch

    ed = ProgramEdit(ep)
    output = ed.graph.output_node()
    touched: list[Node] = []
    for node in list(ed.graph.nodes):
        perm = perm_of(node)
        if perm is None:
            continue
        base, inner = node.args[0], perm_of(node.args[0])
        if inner is not None:
            perm, base = [inner[p] for p in perm], base.args[0]
        identity = perm == list(range(len(perm)))
        if identity and not (base.op == "placeholder" and output in node.users):
            node.replace_all_uses_with(base)
            touched += [node, node.args[0]]
        elif inner is not None and len(node.args[0].users) == 1:
            with ed.graph.inserting_before(node):
                new = ed.graph.call_function(torch.ops.aten.permute.default, (base, perm))
            new.meta = dict(node.meta)  # same shape and strides as the chain it replaces
            node.replace_all_uses_with(new)
            touched += [node, node.args[0]]
    n = erase_if_dead(ed.graph, touched)
    return PassResult(ed.finish() if n else ep, n > 0)


# Registry

# Run order: each pass clears the way for the next. Dead code first (a conv with a dead second user cannot fuse),
# folding next (a weight computed in forward becomes a constant fusion can use), then copies (conv->clone->BN,
# permute->clone->permute), permute pairs (conv->permute pair->BN), and conv+BN fusion last. The graph_optimize step
# still repeats the list until nothing changes, for cases this order does not foresee.
PASSES: tuple[tuple[str, Callable[[ExportedProgram], PassResult]], ...] = (
    ("remove_dead_code", remove_dead_code),
    ("fold_constants", fold_constants),
    ("remove_redundant_copies", remove_redundant_copies),
    ("cancel_permutes", cancel_permutes),
    ("fuse_conv_bn", fuse_conv_bn),
)
