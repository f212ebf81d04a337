"""What np relies on in torch's private API (adapters/torch_private.py), pinned on the installed torch with a small
exported program: an upgrade that moves or changes one of these fails here first."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
import torch

from np_optimizer.adapters import torch_private as tp


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)).add_(1.0)


@pytest.fixture(scope="module")
def program() -> torch.export.ExportedProgram:
    return torch.export.export(_Small().eval(), (torch.randn(2, 4),))


def test_fake_mode_of_an_exported_programs_values(program: torch.export.ExportedProgram) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    vals = [n.meta["val"] for n in program.graph.nodes if n.op == "placeholder"]
    mode = tp.detect_fake_mode(vals)
    assert isinstance(mode, FakeTensorMode) and all(v.fake_mode is mode for v in vals)
    assert tp.detect_fake_mode([torch.ones(1)]) is None  # real tensors: no mode


def test_update_program_verifies_the_edit_and_keeps_the_rest(program: torch.export.ExportedProgram) -> None:
    from torch.export.graph_signature import ExportGraphSignature

    gm = copy.deepcopy(program.graph_module)
    sig = ExportGraphSignature(input_specs=list(program.graph_signature.input_specs),
                               output_specs=list(program.graph_signature.output_specs))
    updated = tp.update_program(program, gm, sig, state_dict=dict(program.state_dict),
                                constants=dict(program.constants))
    assert updated is not program
    assert [n.target for n in updated.graph.nodes] == [n.target for n in gm.graph.nodes]
    assert updated.module_call_graph is not None and updated.range_constraints == program.range_constraints
    x = torch.randn(2, 4)
    assert torch.equal(updated.module()(x), program.module()(x))
    broken = ExportGraphSignature(input_specs=list(program.graph_signature.input_specs)[1:],  # a weight unnamed
                                  output_specs=list(program.graph_signature.output_specs))
    with pytest.raises(Exception):  # noqa: B017 (torch's verifier raises its own error types)
        tp.update_program(program, copy.deepcopy(program.graph_module), broken, state_dict=dict(program.state_dict),
                          constants=dict(program.constants))


def test_op_overloads_their_schema_and_overload_name(program: torch.export.ExportedProgram) -> None:
    targets = [n.target for n in program.graph.nodes if n.op == "call_function"]
    assert targets and all(tp.is_op_overload(t) for t in targets)
    assert not tp.is_op_overload(torch.ops.aten.add) and not tp.is_op_overload(len)
    add = torch.ops.aten.add.Tensor
    assert tp.overload_name(add) == "Tensor" and tp.overload_name(torch.ops.aten.relu.default) == "default"
    assert tp.overload_name(len) == ""
    schema = tp.op_schema(add)
    assert schema.name == "aten::add" and not schema.is_mutable and [a.name for a in schema.arguments][:2] == \
        ["self", "other"]
    assert tp.op_schema(torch.ops.aten.add_.Tensor).is_mutable
    view = tp.op_schema(torch.ops.aten.view.default)
    assert view.returns[0].alias_info is not None and tp.op_schema(add).returns[0].alias_info is None
    assert tp.op_schema(len) is None
    lstm = torch.ops.aten.lstm
    assert {tp.overload_name(getattr(lstm, name)) for name in lstm.overloads()} >= {"input", "data"}


def test_pytree_functions() -> None:
    tree = {"a": (torch.ones(1), [torch.zeros(2), 3]), "b": None}
    leaves, structure = tp.tree_flatten(tree)
    assert [type(x) for x in leaves] == [torch.Tensor, torch.Tensor, int, type(None)]  # None is a leaf too
    assert tp.tree_leaves(tree)[2] == 3
    doubled = tp.tree_map(lambda v: v * 2 if isinstance(v, torch.Tensor) else v, tree)
    assert torch.equal(doubled["a"][0], torch.full((1,), 2.0)) and doubled["a"][1][1] == 3 and doubled["b"] is None
    rebuilt = tp.tree_unflatten([torch.full((1,), 5.0), torch.zeros(2), 7, None], structure)
    assert rebuilt["a"][1][1] == 7 and float(rebuilt["a"][0]) == 5.0


def test_wrapper_subclass_and_quantized_decomposed_ops() -> None:
    assert not tp.is_traceable_wrapper_subclass(torch.ones(2))
    from torch.testing._internal.two_tensor import TwoTensor

    assert tp.is_traceable_wrapper_subclass(TwoTensor(torch.ones(2), torch.zeros(2)))
    tp.register_quantized_decomposed()
    q = torch.ops.quantized_decomposed.quantize_per_tensor.default(torch.tensor([0.5, -1.0]), 0.5, 0, -128, 127,
                                                                   torch.int8)
    assert q.tolist() == [1, -2]


def test_stable_provenance_numbers_the_graphs_while_saving_and_puts_them_back(tmp_path) -> None:
    """Two programs made alike (two quantizations of one model: each records id() of its own graphs in its nodes'
    `from_node`) are saved to the same bytes; the programs keep their own records."""
    import hashlib

    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    model, inputs = build_builtin("mlp")
    programs = [quantize_program(export_model(model, inputs), backend="xnnpack", scheme="W8-A8", target=None,
                                 calibration=[inputs]) for _ in range(2)]
    records = [[s.to_dict() for n in p.graph.nodes for s in n.meta.get("from_node") or []] for p in programs]
    ids = [{r["graph_id"] for r in rs} for rs in records]
    assert ids[0] and ids[0] != ids[1] and all(i > 1000 for i in ids[0])  # addresses, not the same in two programs
    digests = {hashlib.sha256(save_program(p, tmp_path / f"{i}.pt2").read_bytes()).hexdigest()
               for i, p in enumerate(programs)}
    assert len(digests) == 1
    assert [[s.to_dict() for n in p.graph.nodes for s in n.meta.get("from_node") or []] for p in programs] == records


def test_shared_provenance_builds_the_same_records_without_deep_copies(program: torch.export.ExportedProgram) -> None:
    """A pass over the program (fx.Interpreter, as every lowering pass runs) records the same provenance with and
    without shared_provenance, and the constructor torch restores after it deep-copies again."""
    from torch.fx import traceback as fx_traceback

    def without_ids(record: dict[str, Any]) -> dict[str, Any]:  # graph_id is id(graph): differs run to run
        return {**{k: v for k, v in record.items() if k != "graph_id"},
                "from_node": [without_ids(r) for r in record["from_node"]]}

    def histories(shared: bool) -> tuple[list[list[dict[str, Any]]], list[Any]]:
        edited = copy.deepcopy(program)
        with tp.shared_provenance() if shared else contextlib.nullcontext():
            decomposed = edited.run_decompositions({}).run_decompositions({})  # two passes: a history to copy
        nodes = list(decomposed.graph.nodes)
        return [[without_ids(s.to_dict()) for s in n.meta.get("from_node", [])] for n in nodes], nodes

    plain, _nodes = histories(False)
    shared, nodes = histories(True)
    assert plain == shared and any(any(s["from_node"] for s in h) for h in shared)  # a history at least 2 deep
    node = next(n for n in nodes if n.meta.get("from_node"))
    deep = fx_traceback.NodeSource(node)  # the constructor is torch's own again: a deep copy
    assert deep.from_node and deep.from_node[0] is not node.meta["from_node"][0]
    with tp.shared_provenance():
        shallow = fx_traceback.NodeSource(node)
    assert shallow.from_node[0] is node.meta["from_node"][0] and shallow.from_node is not node.meta["from_node"]
    assert shallow.to_dict() == deep.to_dict()


def test_the_canonical_check_is_skipped_and_the_bytes_stay_the_same(program: torch.export.ExportedProgram) -> None:
    """torch.export.save calls serialize.canonicalize once and discards its result: skipped, the .pt2's bytes are the
    same; the serializer's own function is put back after."""
    import io

    from torch._export.serde import serialize

    original = serialize.canonicalize
    calls: list[int] = []

    def counted(ep: Any, constants: set[str] | None = None) -> Any:
        calls.append(1)
        return original(ep, constants)

    def saved(skip: bool) -> bytes:
        buffer = io.BytesIO()
        with tp.without_canonical_check() if skip else contextlib.nullcontext():
            torch.export.save(program, buffer)
        return buffer.getvalue()

    serialize.canonicalize = counted
    try:
        plain = saved(skip=False)
        assert calls == [1]  # torch still checks its canonical form while saving (else nothing to skip)
        skipped = saved(skip=True)
        assert calls == [1] and serialize.canonicalize is counted  # not called, and put back
    finally:
        serialize.canonicalize = original
    assert skipped == plain


def test_materialize_cia_once_does_torchs_work_once_and_again_for_a_new_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch materializes the C++ dispatcher's CIA ops once per op namespace in every `_collect_all_valid_cia_ops`
    (the waste); within materialize_cia_once it does so once, with the same ops collected, and again as soon as an
    op is registered (found like torch finds it). Without the private function the block runs unpatched."""
    from torch._export import utils as export_utils

    calls: list[int] = []
    real = export_utils._materialize_cpp_cia_ops

    def counted() -> None:
        calls.append(1)
        real()

    monkeypatch.setattr(export_utils, "_materialize_cpp_cia_ops", counted)
    plain = export_utils._collect_all_valid_cia_ops()
    assert len(calls) > 1  # torch's own: once per namespace, the same ops each time
    calls.clear()
    lib = torch.library.Library("np_cia_pin", "DEF")
    try:
        with tp.materialize_cia_once():
            assert export_utils._collect_all_valid_cia_ops() == plain
            assert export_utils._collect_all_valid_cia_ops() == plain and len(calls) == 1
            lib.define("twice(Tensor x) -> Tensor")
            lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
            found = export_utils._collect_all_valid_cia_ops()  # before np's own getattr would materialize it
            assert torch.ops.np_cia_pin.twice.default in found
            assert len(calls) == 2
        assert export_utils._materialize_cpp_cia_ops is counted  # put back
    finally:
        lib._destroy()
    monkeypatch.delattr(export_utils, "_materialize_cpp_cia_ops")
    with tp.materialize_cia_once():
        pass


def test_typing_callable_in_ops_gives_py_impl_typings_cached_alias_and_the_same_kernel() -> None:
    """torch._ops imports collections.abc's Callable and py_impl's inner function evaluates `Callable[_P, _T]` at
    each call (a new alias each time: the waste); within typing_callable_in_ops the alias is typing's cached one, the
    kernel registers the same, and isinstance (torch._ops' run-time use) agrees. Put back after."""
    import collections.abc
    import typing

    from torch import _ops

    assert _ops.Callable is collections.abc.Callable

    def annotation(op: Any) -> Any:
        inner = op.py_impl(torch._C.DispatchKey.CPU)
        return inner.__annotations__["fn"]

    op = torch.ops.aten.sinc.default  # an op np's lowerings never see, its py_kernels put back below
    saved = dict(op.py_kernels)
    try:
        plain = annotation(op)
        assert type(plain).__module__ in ("collections.abc", "_collections_abc") and annotation(op) is not plain
        with tp.typing_callable_in_ops():
            cached = annotation(op)
            assert annotation(op) is cached and typing.get_origin(cached) is collections.abc.Callable
            assert isinstance(len, _ops.Callable) and not isinstance(1, _ops.Callable)
            kernel = op.py_impl(torch._C.DispatchKey.CPU)(torch.sin)
            assert kernel is torch.sin and op.py_kernels[torch._C.DispatchKey.CPU] is torch.sin
        assert _ops.Callable is collections.abc.Callable
    finally:
        op.py_kernels.clear()
        op.py_kernels.update(saved)
        op._dispatch_cache.clear()


def test_deferred_codegen_generates_a_modules_code_when_it_is_used_and_the_same_code(
        program: torch.export.ExportedProgram) -> None:
    """Inside deferred_codegen a recompile leaves the code for later: a call, `code`, str() and the PythonCode it
    returned each generate it, the same code and the same outputs as torch's own recompile; pickling works; torch's
    recompile is back after the block, and a module still deferred then generates its code when called."""
    import pickle

    from torch.fx import GraphModule

    x = torch.randn(2, 4)
    eager = program.module()
    expected = eager(x)
    with tp.deferred_codegen():
        assert GraphModule.recompile is not tp._REAL_RECOMPILE["recompile"]
        called = program.module()
        assert "_code" not in called.__dict__  # nothing generated yet
        assert torch.equal(called(x), expected) and "_code" in called.__dict__
        read = program.module()
        assert read.code == eager.code and str(read).startswith(str(eager).split("\n", 1)[0])
        returned = GraphModule(read, read.graph).recompile()
        assert returned.src == eager.code
        traced = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()))
        assert "_code" not in traced.__dict__
        restored = pickle.loads(pickle.dumps(traced))  # pickling copies the module's __dict__: its code generated
        assert torch.equal(restored(x), traced(x)) and restored.code == traced.code
        later = program.module()
    assert GraphModule.recompile is tp._REAL_RECOMPILE["recompile"]
    assert torch.equal(later(x), expected)


@pytest.mark.heavy
def test_a_lowering_with_deferred_codegen_writes_the_same_pte(program: torch.export.ExportedProgram) -> None:
    """An XNNPACK lowering inside deferred_codegen (as lean_lowering lowers) gives the same .pte bytes."""
    from np_optimizer.backends.xnnpack import lower_xnnpack

    def pte(deferred: bool) -> bytes:
        with tp.deferred_codegen() if deferred else contextlib.nullcontext():
            return bytes(lower_xnnpack(copy.deepcopy(program), None, None).edge.to_executorch().buffer)  # type: ignore[arg-type]

    assert pte(True) == pte(False)
