"""Editing a torch.export program consistently (graph + signature + state), and the node helpers passes share.

The programs handled are the ones `torch.export.export` returns and `torch.export.save` writes to `.pt2` (ATen
dialect, export's default IR): lifted parameters/buffers/constants are graph placeholders described by
`ep.graph_signature` and stored in `ep.state_dict` / `ep.constants`. A pass edits a `ProgramEdit` (a deep copy) and
calls `finish()`, which rebuilds the signature from the graph and lets torch's verifier re-check the result.

torch is imported inside functions only: importing this module must stay cheap (`np validate` never loads torch).
"""

from __future__ import annotations

import copy
import functools
import operator
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Graph, Node

__all__ = [
    "ProgramEdit", "copy_program", "aten_op", "aten_ops", "node_arg", "meta_val", "writes_inputs", "aliases_input", "written_in_place",
    "alias_root", "erase_if_dead", "is_dense", "layout_kept", "foldable", "is_layout_op", "perm_of", "refresh_meta",
]

CONSTANT_KINDS = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")
# Export's placeholder order; a new constant is inserted after the last placeholder of the same or an earlier kind.
_KIND_RANK = {"PARAMETER": 0, "BUFFER": 1, "CONSTANT_TENSOR": 2, "CUSTOM_OBJ": 3, "TOKEN": 4, "USER_INPUT": 5}
_NAME_PREFIX = {"PARAMETER": "p_", "BUFFER": "b_", "CONSTANT_TENSOR": "c_"}


# ---------------------------------------------------------------------------------------------------------------------
# Node helpers
# ---------------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def aten_op(name: str) -> Any:
    """aten overload by dotted name ('conv2d.default'); None when this torch build lacks it."""
    import torch

    packet, _, overload = name.partition(".")
    op = getattr(torch.ops.aten, packet, None)
    return getattr(op, overload or "default", None) if op is not None else None


@functools.lru_cache(maxsize=None)
def aten_ops(*names: str) -> frozenset[Any]:
    """The overloads among `names` that exist in this torch build (cached: passes test every node)."""
    return frozenset(op for op in (aten_op(n) for n in names) if op is not None)


def meta_val(arg: Any) -> Any:
    """The fake tensor (or value) a node carries in meta['val']; a non-node argument is returned as is."""
    return arg.meta.get("val") if hasattr(arg, "meta") else arg


def node_arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Argument by position or keyword (export keeps either form)."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def writes_inputs(node: Node) -> bool:
    """Ops that update an argument in place: mutable schemas (add_, copy_, detach_...) and a training-mode
    batch_norm (it updates running_mean/var although its schema does not say so)."""
    from np_optimizer.adapters.torch_private import op_schema

    schema = op_schema(node.target)
    if schema is not None and schema.is_mutable:
        return True
    return node.target == aten_op("batch_norm.default") and bool(node_arg(node, 5, "training"))


def aliases_input(node: Node) -> bool:
    """True for view ops: the result shares storage with the first argument."""
    from np_optimizer.adapters.torch_private import op_schema

    schema = op_schema(node.target)
    return schema is not None and bool(schema.returns) and schema.returns[0].alias_info is not None


def written_in_place(node: Node) -> bool:
    """True when `node`'s tensor, or a view of it, is an argument of an in-place op.

    Why: export's default IR keeps in-place ops (`buffer.add_(1)`) with `buffers_to_mutate` empty, so a buffer or
    a copy cannot be judged by the signature alone.
    """
    for user in node.users:
        if user.op != "call_function":
            continue
        if writes_inputs(user) or (aliases_input(user) and written_in_place(user)):
            return True
    return False


def alias_root(node: Node) -> Node:
    """The tensor `node` is a view of (walks back through view ops)."""
    while node.op == "call_function" and aliases_input(node) and node.args and hasattr(node.args[0], "op"):
        node = cast("Node", node.args[0])  # an argument with `.op` is a Node
    return node


def erase_if_dead(graph: Graph, nodes: Iterable[Node]) -> int:
    """Erase the given call_function nodes that nothing uses; returns how many.

    Visits them last-in-graph first, so a chain whose tail dies is erased whole.
    """
    position = {n: i for i, n in enumerate(graph.nodes)}
    erased = 0
    for node in sorted(set(nodes), key=lambda n: position.get(n, -1), reverse=True):
        if node in position and not node.users and node.op == "call_function":
            graph.erase_node(node)
            erased += 1
    return erased


def is_dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: some permutation of the dims is contiguous.

    torch's own helper (`_prims_common.is_non_overlapping_and_dense`) is private and gone in 2.13. Symbolic sizes
    answer False (conservative).
    """
    try:
        dims = sorted((int(st), int(sz)) for sz, st in zip(t.shape, t.stride()) if int(sz) != 1)
    except Exception:  # a SymInt that cannot be specialized
        return False
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def layout_kept(src: Any, memory_format: Any) -> bool:
    """True when copying `src` with `memory_format` yields the same strides (so the source can stand in)."""
    import torch

    if not isinstance(src, torch.Tensor):
        return False
    if memory_format in (None, torch.preserve_format):
        return is_dense(src)  # preserve_format keeps the strides of a dense tensor only
    return bool(src.is_contiguous(memory_format=memory_format))


# ---------------------------------------------------------------------------------------------------------------------
# Op classification (what folding may evaluate, where it must stop, what a permute does)
# ---------------------------------------------------------------------------------------------------------------------

_LAYOUT_COPY_OPS = ("clone", "contiguous", "_to_copy", "_unsafe_view", "permute_copy", "transpose_copy", "t_copy",
                    "view_copy", "expand_copy", "squeeze_copy", "unsqueeze_copy")


def foldable(target: Any) -> bool:
    """Deterministic, functional aten ops (and getitem) may be evaluated once at optimization time.

    Quantize/dequantize (quantized_decomposed.*, torchao.*) and subclass accessors (export.*) are never folded:
    folding them turns int8 weights back into float ones (executorch's constant_prop_pass does exactly that on ATen).
    """
    import torch

    from np_optimizer.adapters.torch_private import is_op_overload, op_schema

    if target is operator.getitem:
        return True
    if not is_op_overload(target) or target.namespace != "aten":
        return False
    if torch.Tag.nondeterministic_seeded in target.tags or op_schema(target).is_mutable:
        return False
    return not op_schema(target).name.startswith(("aten::_assert", "aten::sym_", "aten::_local_scalar"))


def is_layout_op(target: Any) -> bool:
    """View/reshape/permute-like ops (their result aliases the input) and plain copies."""
    from np_optimizer.adapters.torch_private import op_schema

    schema = op_schema(target)
    if schema is None:
        return target is operator.getitem
    aliases = bool(schema.returns) and schema.returns[0].alias_info is not None
    return aliases or target.overloadpacket.__name__ in _LAYOUT_COPY_OPS


def perm_of(node: Any) -> list[int] | None:
    """Permutation applied by a permute/transpose/t node (output dim i = input dim perm[i]); None for other nodes."""
    if not hasattr(node, "op") or node.op != "call_function":
        return None
    ndim = getattr(meta_val(node.args[0]) if node.args else None, "ndim", None)
    if ndim is None:
        return None
    t = node.target
    if t in aten_ops("permute.default", "permute_copy.default"):
        return [d % ndim if ndim else 0 for d in node.args[1]]
    if t in aten_ops("transpose.int", "transpose_copy.int"):
        perm = list(range(ndim))
        if ndim:
            a, b = node.args[1] % ndim, node.args[2] % ndim
            perm[a], perm[b] = perm[b], perm[a]
        return perm
    if t in aten_ops("t.default", "t_copy.default"):
        return [1, 0] if ndim == 2 else list(range(ndim))
    return None


def _fake_mode(graph: Graph) -> Any:
    from np_optimizer.adapters.torch_private import detect_fake_mode

    vals = [n.meta.get("val") for n in graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode([v for v in vals if v is not None])
    assert mode is not None, "exported program without fake tensors in node.meta['val']"
    return mode


def refresh_meta(edit: ProgramEdit) -> None:
    """Re-run fake-tensor propagation so node.meta['val'] matches the edited graph (e.g. new strides)."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    vals = [n.meta["val"] for n in edit.graph.nodes if n.op == "placeholder"]
    FakeTensorProp(edit.gm, _fake_mode(edit.graph)).propagate_dont_convert_inputs(*vals)


# ---------------------------------------------------------------------------------------------------------------------
# ProgramEdit
# ---------------------------------------------------------------------------------------------------------------------


def copy_program(ep: ExportedProgram) -> ExportedProgram:
    """A deep copy of the program's graph, signature and metadata that shares its weight and constant tensors.

    Why share: nothing in np writes into a program's tensors (an edit gives a constant a new tensor: ProgramEdit's
    set_const_value, add_const), and cloning every weight made each graph pass and each lowering copy the whole model
    (45 MB for a ResNet-18) again."""
    tensors = [*ep.state_dict.values(), *ep.constants.values()]
    memo: dict[int, Any] = {id(t): t for t in tensors}
    return copy.deepcopy(ep, memo)


class ProgramEdit:
    """A copy of a program whose graph may be edited (copy_program: its tensors shared, never written);
    `finish()` rebuilds a valid program. The caller's program is never mutated.
    """

    def __init__(self, ep: ExportedProgram) -> None:
        self.src = copy_program(ep)
        self.gm = self.src.graph_module
        self.graph: Graph = self.gm.graph
        self.specs: dict[str, Any] = self._specs_by_placeholder()
        self.output_specs = list(self.src.graph_signature.output_specs)
        self.state_dict: dict[str, Any] = dict(self.src.state_dict)
        self.constants: dict[str, Any] = dict(self.src.constants)
        self.mutated_buffers = set(self.src.graph_signature.buffers_to_mutate.values())

    def _specs_by_placeholder(self) -> dict[str, Any]:
        """Input specs keyed by their placeholder's name in the copy. deepcopy renames a placeholder whose name is a
        Python builtin (nn.Sequential's `input` becomes `input_1`) while the signature keeps the old name, so specs
        are matched to placeholders by position (the signature's order is the placeholders' order) and renamed."""
        from torch.export.graph_signature import TensorArgument

        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        specs: dict[str, Any] = {}
        for node, spec in zip(placeholders, self.src.graph_signature.input_specs):
            if isinstance(spec.arg, TensorArgument) and spec.arg.name != node.name:
                spec = copy.copy(spec)
                spec.arg = TensorArgument(name=node.name)
            specs[node.name] = spec
        return specs

    # ---- constants ---------------------------------------------------------------------------------------------
    def kind(self, node: Node) -> str | None:
        """InputKind name of a placeholder ('PARAMETER', 'USER_INPUT', ...); None for other nodes."""
        spec = self.specs.get(node.name) if node.op == "placeholder" else None
        return spec.kind.name if spec is not None else None

    def target(self, node: Node) -> str:
        """State name (FQN) behind a placeholder, e.g. 'conv.weight'."""
        return str(self.specs[node.name].target)

    def const_value(self, node: Any) -> torch.Tensor | None:
        """Tensor behind a parameter/buffer/constant placeholder that nothing updates; None for anything else."""
        import torch

        if not hasattr(node, "op") or node.op != "placeholder":
            return None
        spec = self.specs.get(node.name)
        if spec is None or spec.kind.name not in CONSTANT_KINDS:
            return None
        if spec.kind.name == "BUFFER" and spec.target in self.mutated_buffers:
            return None  # state updated at run time: not a constant
        if written_in_place(node):
            return None
        value = self.state_dict.get(spec.target, self.constants.get(spec.target))
        return value if isinstance(value, torch.Tensor) else None

    def set_const_value(self, node: Node, value: torch.Tensor) -> None:
        """Replace the tensor behind a constant placeholder (same shape and dtype; the FQN is kept)."""
        import torch

        spec = self.specs[node.name]
        old = self.const_value(node)
        assert old is not None and old.shape == value.shape and old.dtype == value.dtype
        if isinstance(old, torch.nn.Parameter):
            value = torch.nn.Parameter(value.detach(), requires_grad=old.requires_grad)
        store = self.state_dict if spec.target in self.state_dict else self.constants
        store[spec.target] = value
        node.meta["val"] = _fake_mode(self.graph).from_tensor(value, static_shapes=True)

    def _unique_fqn(self, hint: str) -> str:
        fqn, i = hint, 0
        taken = set(self.state_dict) | set(self.constants) | {s.target for s in self.specs.values()}
        while fqn in taken:
            i += 1
            fqn = f"{hint}_{i}"
        return fqn

    def add_const(self, fqn_hint: str, value: torch.Tensor, kind: str) -> Node:
        """New PARAMETER / BUFFER / CONSTANT_TENSOR placeholder holding `value`."""
        import torch
        from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

        fqn = self._unique_fqn(fqn_hint)
        value = value.detach()
        if kind == "PARAMETER":
            self.state_dict[fqn] = torch.nn.Parameter(value, requires_grad=False)
        elif kind == "BUFFER":
            self.state_dict[fqn] = value
        else:
            self.constants[fqn] = value
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        before = [n for n in placeholders if _KIND_RANK.get(self.kind(n) or "", 9) <= _KIND_RANK[kind]]
        ctx = (self.graph.inserting_after(before[-1]) if before
               else self.graph.inserting_before(placeholders[0] if placeholders else None))
        with ctx:
            node = self.graph.placeholder(_NAME_PREFIX[kind] + fqn.replace(".", "_"))
        node.target = node.name  # export keeps placeholder target == name
        node.meta["val"] = _fake_mode(self.graph).from_tensor(value, static_shapes=True)
        self.specs[node.name] = InputSpec(kind=getattr(InputKind, kind), arg=TensorArgument(name=node.name),
                                          target=fqn, persistent=True if kind == "BUFFER" else None)
        return node

    def drop_unused_inputs(self, only: Iterable[Node] | None = None) -> int:
        """Erase unused parameter/buffer/constant placeholders and their tensors; returns how many.

        Mutated buffers stay: their new value is still written back through the outputs.
        """
        allowed = set(only) if only is not None else None
        dropped = 0
        for node in [n for n in self.graph.nodes if n.op == "placeholder"]:
            spec = self.specs.get(node.name)
            if node.users or spec is None or (allowed is not None and node not in allowed):
                continue
            if spec.kind.name not in CONSTANT_KINDS:
                continue
            if spec.kind.name == "BUFFER" and spec.target in self.mutated_buffers:
                continue
            self.graph.erase_node(node)
            del self.specs[node.name]
            if not any(s.target == spec.target for s in self.specs.values()):
                self.state_dict.pop(spec.target, None)
                self.constants.pop(spec.target, None)
            dropped += 1
        return dropped

    # ---- finishing ---------------------------------------------------------------------------------------------
    def finish(self) -> ExportedProgram:
        """Rebuild the signature (inputs follow placeholders, outputs follow the output node) and re-verify.

        Uses `ExportedProgram._update` (private torch API, adapters/torch_private.py): it runs torch's verifier on
        the new program.
        """
        from torch.export.graph_signature import ExportGraphSignature, TensorArgument

        from np_optimizer.adapters.torch_private import update_program

        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        input_specs = [self.specs[n.name] for n in placeholders]
        outputs = list(self.graph.output_node().args[0])  # type: ignore[arg-type]
        output_specs = []
        for spec, out in zip(self.output_specs, outputs):
            spec = copy.copy(spec)
            if isinstance(spec.arg, TensorArgument) and hasattr(out, "name"):
                spec.arg = TensorArgument(name=out.name)  # the output node may have been replaced
            output_specs.append(spec)
        self._sync_module_call_graph(output_specs)
        self.graph.lint()
        self.gm.recompile()
        sig = ExportGraphSignature(input_specs=input_specs, output_specs=output_specs)
        return update_program(self.src, self.gm, sig, state_dict=self.state_dict, constants=self.constants)

    def _sync_module_call_graph(self, output_specs: list[Any]) -> None:
        # The root entry names the user inputs/outputs (torch.export.unflatten reads it): keep output names in step.
        user_out = [s.arg for s in output_specs if s.kind.name == "USER_OUTPUT"]
        for entry in self.src.module_call_graph:  # (the list itself: torch's public property returns it)
            if entry.fqn == "" and entry.signature is not None and len(entry.signature.outputs) == len(user_out):
                entry.signature.outputs = [copy.copy(a) for a in user_out]
