"""The one place np touches torch's private API (modules and attributes with a leading underscore): each function here
says what np relies on, and tests/adapters/test_torch_private.py pins it on the installed torch, so an upgrade that
moves or changes one fails there first, not inside a step, a compile or a statistic.

    detect_fake_mode        torch._guards.detect_fake_mode: the FakeTensorMode of an exported program's values
    update_program          ExportedProgram._update: a new program from an edited graph module and signature, run
                            through torch's verifier (graph/edit.py)
    is_op_overload          isinstance of torch._ops.OpOverload (an ATen or custom op with its overload chosen)
    op_schema, overload_name  an OpOverload's `_schema` (name, arguments, is_mutable) and `_overloadname`
    tree_map, tree_leaves, tree_flatten, tree_unflatten   torch.utils._pytree (torch has no public pytree module yet)
    is_traceable_wrapper_subclass   torch.utils._python_dispatch's: a tensor subclass (torchao's) with inner tensors
    register_quantized_decomposed   torch.ao.quantization.fx._decomposed imported: it defines
                            torch.ops.quantized_decomposed (the PT2E q/dq ops) that loading a .pt2 resolves by name
    stable_provenance       nodes' `from_node` provenance (torch.fx.traceback.NodeSource) numbered instead of
                            carrying id(graph) while a .pt2 is written; its cached `_dict` reset, then put back
    without_canonical_check torch._export.serde.serialize.canonicalize skipped while a .pt2 is written: the
                            serializer calls it as a self-check and discards its result (a deep copy of the whole
                            serialized program: about half of the CPU of torch.export.save)
    shared_provenance       NodeSource(node) built with a shallow copy of the node's `from_node` list instead of
                            copy.deepcopy: every pass of a lowering records each node's whole history again, so
                            the deep copies grow with the passes run (about a tenth of a lowering's CPU time)
    materialize_cia_once    torch._export.utils._materialize_cpp_cia_ops (every CompositeImplicitAutograd op of the
                            C++ dispatcher made a torch.ops attribute) skipped while the dispatcher's list of those
                            ops is the one already materialized: torch runs it once per op namespace in every
                            run_decompositions (about 8% of a lowering's CPU time)
    typing_callable_in_ops  torch._ops' module-global `Callable` (collections.abc's) swapped for typing's while np
                            lowers: OperatorBase.py_impl evaluates `Callable[_P, _T]` in its inner function's
                            annotations at every call (36,000 calls a lowering), and typing caches that subscription
    deferred_codegen        GraphModule.recompile, while np lowers, generating the graph's Python code only when
                            the module is called or its code read (the per-module class GraphModule makes, its
                            `forward` and `_code`): about 200 recompiles a lowering whose code nothing uses

torch is imported inside each function: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.export.graph_signature import ExportGraphSignature
    from torch.fx import GraphModule

__all__ = ["detect_fake_mode", "update_program", "is_op_overload", "op_schema", "overload_name", "tree_map",
           "tree_leaves", "tree_flatten", "tree_unflatten", "is_traceable_wrapper_subclass",
           "register_quantized_decomposed", "stable_provenance", "without_canonical_check", "shared_provenance",
           "materialize_cia_once", "typing_callable_in_ops", "lean_lowering"]


def detect_fake_mode(values: Sequence[Any]) -> Any:
    """The FakeTensorMode the fake tensors among `values` belong to (an exported program's node.meta['val']), or
    None when there are none."""
    from torch._guards import detect_fake_mode as detect

    return detect(tuple(values))


def update_program(program: ExportedProgram, graph_module: GraphModule, signature: ExportGraphSignature, *,
                   state_dict: dict[str, Any], constants: dict[str, Any]) -> ExportedProgram:
    """A copy of `program` with this graph module, signature, state dict and constants (its range constraints,
    module call graph and verifiers kept), verified by torch: an inconsistent edit raises here."""
    updated: ExportedProgram = program._update(graph_module, signature, state_dict=state_dict, constants=constants)
    return updated


def is_op_overload(target: object) -> bool:
    """Whether a call_function node's target is an operator overload (torch.ops.aten.add.Tensor), as opposed to an
    overload packet, a Python function or a higher-order op."""
    import torch

    return isinstance(target, torch._ops.OpOverload)


def op_schema(target: object) -> Any:
    """An operator's schema (`.name` "aten::add.Tensor", `.arguments`, `.returns`, `.is_mutable`), or None for a
    target that has none."""
    return getattr(target, "_schema", None)


def overload_name(target: object) -> str:
    """An operator overload's name ("Tensor" for aten.add.Tensor; "default" for a single overload); "" for none."""
    return str(getattr(target, "_overloadname", ""))


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """`tree` with `fn` applied to each leaf, its structure (tuples, lists, dicts, dataclasses torch knows) kept."""
    from torch.utils import _pytree

    return _pytree.tree_map(fn, tree)


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of `tree`, in order."""
    from torch.utils import _pytree

    return list(_pytree.tree_leaves(tree))


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """(the leaves of `tree`, its structure), for tree_unflatten."""
    from torch.utils import _pytree

    leaves, structure = _pytree.tree_flatten(tree)
    return list(leaves), structure


def tree_unflatten(leaves: list[Any], structure: Any) -> Any:
    """The tree `structure` (from tree_flatten) rebuilt with these leaves."""
    from torch.utils import _pytree

    return _pytree.tree_unflatten(leaves, structure)


def is_traceable_wrapper_subclass(tensor: Any) -> TypeGuard[Any]:
    """Whether `tensor` is a wrapper tensor subclass (torchao's quantized tensors) whose data sits in inner tensors
    (`__tensor_flatten__`)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass as check

    return bool(check(tensor))


def register_quantized_decomposed() -> None:
    """Define torch.ops.quantized_decomposed (quantize_per_tensor, dequantize_per_channel, ...), which programs PT2E
    wrote name and torch.export.load resolves by name."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401


@contextlib.contextmanager
def stable_provenance(program: ExportedProgram) -> Iterator[None]:
    """While the block runs (torch.export.save), every `from_node` provenance record of the program's nodes names
    its graph by a number in order of first appearance instead of id(graph): a memory address, which made the .pt2 of
    one checkpoint differ between two processes (and its compile key, so the compile cache never hit across
    experiments). The caller's records are put back after, cached dicts included."""
    import torch

    numbers: dict[int, int] = {}
    seen: set[int] = set()
    undo: list[tuple[Any, Any, int | None, Any]] = []  # (source, its node_info, the info's graph_id, its cached dict)

    def visit(source: Any) -> None:
        if id(source) in seen:
            return
        seen.add(id(source))
        info = getattr(source, "node_info", None)
        undo.append((source, info, info.graph_id if info is not None else None, source._dict))
        source._dict = None  # to_dict() caches the ids it saw; the writer reads to_dict()
        for parent in source.from_node:
            visit(parent)

    for module in program.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                for source in node.meta.get("from_node") or []:
                    visit(source)
    infos: dict[int, Any] = {id(info): info for _s, info, _g, _d in undo if info is not None}
    for info in infos.values():
        info.graph_id = numbers.setdefault(info.graph_id, len(numbers))
    try:
        yield
    finally:
        for source, info, graph_id, cached in reversed(undo):
            if info is not None and graph_id is not None:
                info.graph_id = graph_id
            source._dict = cached


@contextlib.contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.<name>` is `value` while the block runs and what it was again after (each patch of upstream waste
    below: np's lowering and saving run in one thread)."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def without_canonical_check() -> Iterator[None]:
    """While the block runs (torch.export.save), torch's serializer skips `canonicalize(serialized_ep, constants)`,
    which it calls only to test that a canonical form exists ("Test canonical form is well defined") and whose
    result it throws away: a deep copy and a sort of the whole serialized program, about half of the CPU of writing
    a ResNet-18's .pt2. The bytes written are the same. The module's name is put back after; not thread-safe (np
    writes its checkpoints from one thread)."""
    from torch._export.serde import serialize

    def skipped(ep: Any, constants: set[str] | None = None) -> Any:
        return ep

    with _swapped(serialize, "canonicalize", skipped):
        yield


@contextlib.contextmanager
def shared_provenance() -> Iterator[None]:
    """While the block runs (np's lowering), a new provenance record (torch.fx.traceback.NodeSource) shares the
    records of its node's history instead of deep-copying them: torch builds one for every node each pass visits
    (fx.Interpreter), copying the node's whole `from_node` tree each time. No one changes a NodeSource after it is
    built (torch appends only to a node's own `from_node` list, which is still copied), so the records are equal,
    and so are the programs and the files written from them; the deep copies took 5 to 12% of the CPU of an
    XNNPACK or Ethos-U lowering here. Not re-entrant across threads: np lowers in one thread."""
    from torch.fx import traceback as fx_traceback

    cls = fx_traceback.NodeSource
    original = cls.__init__

    def init(self: Any, node: Any, pass_name: str = "", action: Any = None) -> None:
        history = node.meta.get("from_node") if node is not None else None
        if not history:
            original(self, node, pass_name, action)
            return
        node.meta["from_node"] = []  # the constructor's deepcopy sees an empty history
        try:
            original(self, node, pass_name, action)
        finally:
            node.meta["from_node"] = history
        self.from_node = list(history)

    with _swapped(cls, "__init__", init):
        yield


@contextlib.contextmanager
def materialize_cia_once() -> Iterator[None]:
    """While the block runs (np's lowering), torch's `_materialize_cpp_cia_ops` does its work only when the C++
    dispatcher's list of CompositeImplicitAutograd ops differs from the list it last materialized. What it does is
    idempotent (a getattr that makes each op a torch.ops attribute); torch calls it once per op namespace (39 to 43
    here) in each `_collect_all_valid_cia_ops`, five times a lowering: about 50 ms each time, the same ops each time.
    An op registered meanwhile (ExecuTorch defines some while lowering) changes the list, so it is materialized as
    torch would. A torch without the function: the block runs unpatched. Like shared_provenance, one lowering
    thread at a time."""
    import torch

    try:
        from torch._export import utils as export_utils

        original = export_utils._materialize_cpp_cia_ops
        registrations = torch._C._dispatch_get_registrations_for_dispatch_key
    except (ImportError, AttributeError):
        yield
        return
    done: list[Any] = [None]  # the registrations last materialized

    def materialize() -> None:
        current = registrations("CompositeImplicitAutograd")
        if current == done[0]:
            return
        original()
        done[0] = current

    with _swapped(export_utils, "_materialize_cpp_cia_ops", materialize):
        yield


@contextlib.contextmanager
def typing_callable_in_ops() -> Iterator[None]:
    """While the block runs (np's lowering), torch._ops sees typing.Callable where it imported collections.abc's.
    `OperatorBase.py_impl` defines a function annotated `Callable[_P, _T]` at every call, and a decomposition calls it
    for each of about 700 CIA ops and 9 dispatch keys, six times a lowering: collections.abc builds a new generic
    alias each time (0.16 CPU-s a lowering here), typing returns its cached one (0.03). Both are the same type for
    isinstance (torch._ops' only other run-time use); only the annotations' objects differ, which nothing reads. A
    torch._ops without that import (annotations made lazy, a module renamed): the block runs unpatched; so does a
    block inside another one (the outer one puts it back)."""
    import collections.abc
    import typing

    try:
        from torch import _ops as ops
    except ImportError:
        yield
        return
    if getattr(ops, "Callable", None) is not collections.abc.Callable:
        yield
        return
    with _swapped(ops, "Callable", typing.Callable):
        yield


class _CodeOnRead:
    """A deferred GraphModule's `_code` (on its own class: torch gives each GraphModule one): reading it generates the
    code; torch's recompile then sets it as a plain attribute."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        _generate(obj)
        return obj.__dict__["_code"]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["_code"] = value


class _CodeLater:
    """What a deferred recompile returns in place of torch's PythonCode: the real one, generated on first use."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(_generate(self._module), name)


_REAL_RECOMPILE: dict[str, Any] = {}  # torch's GraphModule.recompile, kept at the first deferral
_DEFERRED = ("_np_deferred", "_code", "forward", "__reduce__", "__reduce_package__")  # set on a deferred module's class


def _generate(module: Any) -> Any:
    """Generate a deferred module's code now (torch's own recompile, the deferral undone); its PythonCode."""
    cls = type(module)
    if cls.__dict__.get("_np_deferred"):
        for name in _DEFERRED:
            delattr(cls, name)
    return _REAL_RECOMPILE["recompile"](module)


def _call_generated(self: Any, *args: Any, **kwargs: Any) -> Any:
    _generate(self)
    return type(self).forward(self, *args, **kwargs)


def _reduce_generated(self: Any) -> Any:  # pickling copies the module's __dict__, its `_code` included
    from torch.fx import GraphModule

    _generate(self)
    return GraphModule.__reduce__(self)


def _reduce_package_generated(self: Any, exporter: Any) -> Any:
    from torch.fx import GraphModule

    _generate(self)
    return GraphModule.__reduce_package__(self, exporter)


@contextlib.contextmanager
def deferred_codegen() -> Iterator[None]:
    """While the block runs (np's lowering), GraphModule.recompile does what it must at once (the pytree specs) and
    leaves the Python code of the graph to be generated when something needs it: a call (forward), its `code` or
    `_code`, str(), pickling, the PythonCode it returned. A lowering recompiles about 200 graph modules whose code
    nothing runs or reads (each pass rebuilds the module and recompiles it; torch generates and compiles the source
    each time): 15 to 20% of an XNNPACK lowering here. The graphs are the same, so are the programs and the files.
    What defers a module sits on its own class (torch makes one per GraphModule), so a module still deferred when
    the block ends generates its code when used, as inside. One lowering thread at a time."""
    from torch.fx import GraphModule
    from torch.fx.graph import _PyTreeCodeGen

    def recompile(self: Any) -> Any:
        codegen = self._graph._codegen
        if isinstance(codegen, _PyTreeCodeGen):
            self._in_spec, self._out_spec = codegen.pytree_info.in_spec, codegen.pytree_info.out_spec
        cls = type(self)
        if not cls.__dict__.get("_np_deferred"):
            self.__dict__.pop("_code", None)  # nothing reads a stale one: the class's `_code` generates it
            for name, value in zip(_DEFERRED, (True, _CodeOnRead(), _call_generated, _reduce_generated,
                                               _reduce_package_generated), strict=True):
                setattr(cls, name, value)
        return _CodeLater(self)

    _REAL_RECOMPILE.setdefault("recompile", GraphModule.recompile)
    with _swapped(GraphModule, "recompile", recompile):
        yield


@contextlib.contextmanager
def lean_lowering() -> Iterator[None]:
    """How np lowers a program (the compile, and the ETRecord's lowering again): shared provenance records, CIA ops
    materialized once, typing's cached Callable and graph code generated only when used, each the same programs and
    files with less repeated work."""
    with shared_provenance(), materialize_cia_once(), typing_callable_in_ops(), deferred_codegen():
        yield
