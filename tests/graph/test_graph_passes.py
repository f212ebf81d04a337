"""Graph passes (np_optimizer.graph.passes) and static counters (np_optimizer.graph.stats) on torch.export programs.

Each pass runs on a small model built to need it. Tolerances, stated once and used everywhere:
  * structural passes (cancel_permutes, remove_redundant_copies, remove_dead_code): outputs bit-identical;
  * numeric passes (fuse_conv_bn, fold_constants): max abs error <= 1e-5 x max|reference output|;
  * XNNPACK .pte run by the ExecuTorch runtime vs the passed program in eager: <= 1e-4 x scale
    (1e-2 for torchao's int8-activation program).
Exported programs are shared through module-scoped fixtures; passes never mutate their input, each test that
needs its own copy says so, and each fixture checks at teardown that no test changed it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
import torch.nn as nn

from np_optimizer.fidelity import max_abs_error
from np_optimizer.graph.passes import (
    PASSES,
    PassResult,
    cancel_permutes,
    fold_constants,
    fuse_conv_bn,
    remove_dead_code,
    remove_redundant_copies,
)
from np_optimizer.graph.stats import (
    MACS_CONVENTION,
    count_macs,
    count_params,
    node_count,
    op_histogram,
    weight_bytes,
)
from np_optimizer.models.zoo import build_builtin

REL_TOL = 1e-5
PTE_REL_TOL = 1e-4
BN = "aten.batch_norm.default"


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------------------------------
# Models built to need each pass
# ---------------------------------------------------------------------------------------------------------------------


def _randomize_bn(m: nn.Module) -> nn.Module:
    """Non-trivial BN statistics, otherwise a fused BN would be (almost) the identity."""
    g = torch.Generator().manual_seed(1)
    for bn in m.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                bn.running_mean.copy_(torch.rand(bn.num_features, generator=g) * 2 - 1)
                bn.running_var.copy_(torch.rand(bn.num_features, generator=g) * 1.5 + 0.5)
                bn.weight.copy_(torch.rand(bn.num_features, generator=g) * 1.5 + 0.5)
                bn.bias.copy_(torch.rand(bn.num_features, generator=g) * 2 - 1)
    return m.eval()


class ConvBN(nn.Module):
    """conv(no bias)+bn, grouped conv(bias)+bn, conv1d+bn1d, and a conv whose output has two users (not fusable)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8)
        self.c3, self.b3 = nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8)
        self.c4, self.b4 = nn.Conv1d(8, 4, 3), nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.relu(self.b2(self.c2(x)))
        y = self.c3(x)
        x = self.b3(y) + y
        return self.b4(self.c4(x.mean(3)))


class Permutes(nn.Module):
    """NCHW->NHWC->NCHW pair (identity), a transpose pair (identity) and a 3-op cascade (one permute)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = y.permute(0, 2, 3, 1).permute(0, 3, 1, 2)
        y = y.transpose(1, 2).transpose(1, 2)
        z = y.permute(0, 2, 3, 1).transpose(1, 2).permute(0, 1, 3, 2)  # composes to [0, 3, 1, 2]
        return torch.relu(y) + z.sum()


class Copies(nn.Module):
    """Redundant: clone(), clone(contiguous_format) of a contiguous tensor, .to(same dtype, copy=True).
    Needed (must stay): contiguous() after a permute (a view follows), clone(channels_last)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).clone()
        y = y.clone(memory_format=torch.contiguous_format).to(torch.float32, copy=True)
        z = y.permute(0, 2, 3, 1).contiguous().view(y.shape[0], -1)
        w = y.clone(memory_format=torch.channels_last)
        return z.sum(1, keepdim=True) + y.flatten(1) + w.sum()


class Dead(nn.Module):
    """A computed branch nobody uses (its linear's parameters must leave the program too)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.unused_fc = nn.Linear(16, 8), nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ = torch.sigmoid(self.unused_fc(x)) * 3
        return self.fc(x)


class Fold(nn.Module):
    """Weights transformed at run time: w.t() * 2 and exp(log_scale)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(_randn(8, 16, seed=3))
        self.log_scale = nn.Parameter(_randn(8, seed=4) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ (self.w.t() * 2)) * self.log_scale.exp()


class NeedsAll(nn.Module):
    """Needs every pass: conv+BN, an identity transpose pair, a redundant clone, a dead branch, a folded weight."""

    def __init__(self) -> None:
        super().__init__()
        self.convbn, self.dead, self.fold = ConvBN(), nn.Linear(14, 32), Fold()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.convbn(x).transpose(1, 2).transpose(1, 2).clone()  # (N, 4, 14)
        _ = torch.sigmoid(self.dead(y))
        return self.fold(y.flatten(1)[:, :16])


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 128), nn.Linear(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


# pass name -> (model class, input shape)
PASS_CASES: dict[str, tuple[type[nn.Module], tuple[int, ...]]] = {
    "fuse_conv_bn": (ConvBN, (2, 3, 16, 16)),
    "cancel_permutes": (Permutes, (1, 4, 6, 5)),
    "remove_redundant_copies": (Copies, (2, 3, 8, 8)),
    "remove_dead_code": (Dead, (4, 16)),
    "fold_constants": (Fold, (4, 16)),
}
EXACT = {"cancel_permutes", "remove_redundant_copies", "remove_dead_code"}


# ---------------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------------


def export(m: nn.Module, args: tuple[Any, ...], **kw: Any) -> torch.export.ExportedProgram:
    return torch.export.export(_randomize_bn(m), args, **kw)


def run(ep: torch.export.ExportedProgram, args: tuple[Any, ...]) -> Any:
    with torch.no_grad():
        return ep.module()(*args)


def rel_err(ref: torch.Tensor, got: torch.Tensor) -> float:
    return max_abs_error(ref, got) / max(float(ref.abs().max()), 1e-12)


def save_load(ep: torch.export.ExportedProgram, path: Path) -> torch.export.ExportedProgram:
    torch.export.save(ep, str(path))
    return torch.export.load(str(path))


def saved_size(ep: torch.export.ExportedProgram, path: Path) -> int:
    torch.export.save(ep, str(path))
    return os.path.getsize(path)


def lower_and_run(ep: torch.export.ExportedProgram, args: tuple[Any, ...]) -> torch.Tensor:
    """XNNPACK lowering as the product does it, then the .pte through the host ExecuTorch runtime."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    prog = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    method = Runtime.get().load_program(prog.buffer).load_method("forward")
    return method.execute(list(args))[0]  # type: ignore[no-any-return]


def run_all_passes(ep: torch.export.ExportedProgram, args: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """PASSES once, each changed pass checked against the program before it (as the graph_optimize step does)."""
    for name, p in PASSES:
        res = p(ep)
        if res.changed:
            assert rel_err(run(ep, args), run(res.ep, args)) <= REL_TOL, name
            ep = res.ep
    return ep


def eager_macs(m: nn.Module, args: tuple[Any, ...]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        m(*args)
    return int(fc.get_total_flops()) // 2


class PassRun(NamedTuple):
    before: torch.export.ExportedProgram
    hist_before: dict[str, int]
    state_before: set[str]
    res: PassResult
    args: tuple[Any, ...]


# ---------------------------------------------------------------------------------------------------------------------
# Fixtures (module-scoped: export, quantize and pass once; each checks at teardown that no test changed it)
# ---------------------------------------------------------------------------------------------------------------------


def _fingerprint(ep: torch.export.ExportedProgram, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a test that edits a shared program in place would change: graph, signature, state names, outputs."""
    return str(ep.graph), str(ep.graph_signature), sorted(ep.state_dict), sorted(ep.constants), run(ep, args)


def _assert_unchanged(before: tuple[Any, ...], ep: torch.export.ExportedProgram, args: tuple[Any, ...],
                      what: str) -> None:
    after = _fingerprint(ep, args)
    assert before[:-1] == after[:-1] and max_abs_error(before[-1], after[-1]) == 0.0, \
        f"a test changed the shared {what} in place: give it copy.deepcopy(...)"


@pytest.fixture(scope="module")
def pass_runs() -> Iterator[dict[str, PassRun]]:
    """Each pass applied once to the model built to need it."""
    passes = dict(PASSES)
    out = {}
    for name, (cls, shape) in PASS_CASES.items():
        torch.manual_seed(0)
        args = (_randn(*shape),)
        ep = export(cls(), args)
        out[name] = PassRun(ep, op_histogram(ep), set(ep.state_dict), passes[name](ep), args)
    before = {name: (_fingerprint(r.before, r.args), _fingerprint(r.res.ep, r.args)) for name, r in out.items()}
    yield out
    for name, r in out.items():
        _assert_unchanged(before[name][0], r.before, r.args, f"input program of {name}")
        _assert_unchanged(before[name][1], r.res.ep, r.args, f"output program of {name}")


@pytest.fixture(scope="module")
def cnn() -> Iterator[tuple[nn.Module, tuple[torch.Tensor, ...], torch.export.ExportedProgram]]:
    """The built-in sample CNN (two residual blocks, 6 bias-free conv+BN pairs, a linear) and its float program."""
    model, args = build_builtin("small_cnn")
    ep = torch.export.export(model, args)
    before, state = _fingerprint(ep, args), {k: v.clone() for k, v in model.state_dict().items()}
    yield model, args, ep
    _assert_unchanged(before, ep, args, "small_cnn program")
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items()), "a test changed the shared small_cnn"


@pytest.fixture(scope="module")
def qep(cnn: Any) -> Iterator[torch.export.ExportedProgram]:
    """PT2E int8 program (XNNPACKQuantizer, per-channel), re-exported after convert_pt2e as the product does."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, args, _ = cnn
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(copy.deepcopy(model), args).module(), q)
    for seed in range(4):
        prepared(_randn(*args[0].shape, seed=seed))
    ep = torch.export.export(convert_pt2e(prepared), args)
    before = _fingerprint(ep, args)
    yield ep
    _assert_unchanged(before, ep, args, "PT2E program")


@pytest.fixture(scope="module")
def torchao_mlp() -> Iterator[tuple[nn.Module, nn.Module, torch.export.ExportedProgram, tuple[torch.Tensor, ...]]]:
    """(float MLP, torchao int8-activation/int4-weight MLP, its exported program, inputs)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    m = MLP().eval()
    qm = copy.deepcopy(m)
    quantize_(qm, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    args = (_randn(2, 64),)
    ep = torch.export.export(qm, args)
    before = _fingerprint(ep, args)
    yield m, qm, ep, args
    _assert_unchanged(before, ep, args, "torchao program")


# ---------------------------------------------------------------------------------------------------------------------
# Registry and inspection
# ---------------------------------------------------------------------------------------------------------------------


def test_passes_registry_order() -> None:
    assert [name for name, _ in PASSES] == ["remove_dead_code", "fold_constants", "remove_redundant_copies",
                                            "cancel_permutes", "fuse_conv_bn"]
    assert all(p.__name__ == name for name, p in PASSES)


def test_histogram_and_node_count(pass_runs: dict[str, PassRun]) -> None:
    ep = pass_runs["fold_constants"].before
    h = op_histogram(ep)
    assert h == {"aten.exp.default": 1, "aten.matmul.default": 1, "aten.mul.Tensor": 2, "aten.t.default": 1}
    assert node_count(ep) == sum(h.values()) == 5


# ---------------------------------------------------------------------------------------------------------------------
# Each pass on the model built to need it
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PASS_CASES))
def test_pass_keeps_outputs_saves_and_lowers(name: str, pass_runs: dict[str, PassRun], tmp_path: Path) -> None:
    """Common checks: changed, outputs kept, input untouched, idempotent, .pt2 round trip (not larger).
    XNNPACK lowering of pass outputs is checked once, on NeedsAll (test_all_passes_lower_to_xnnpack)."""
    r = pass_runs[name]
    assert r.res.changed and r.res.ep is not r.before
    assert op_histogram(r.before) == r.hist_before and set(r.before.state_dict) == r.state_before
    ref, got = run(r.before, r.args), run(r.res.ep, r.args)
    if name in EXACT:
        assert max_abs_error(ref, got) == 0.0
    else:
        assert rel_err(ref, got) <= REL_TOL
    assert not dict(PASSES)[name](r.res.ep).changed
    assert saved_size(r.res.ep, tmp_path / "after.pt2") <= saved_size(r.before, tmp_path / "before.pt2")
    assert max_abs_error(got, run(torch.export.load(str(tmp_path / "after.pt2")), r.args)) == 0.0


@pytest.mark.heavy
def test_all_passes_lower_to_xnnpack(tmp_path: Path) -> None:
    """One program every pass changes: PASSES in order, then .pt2 round trip, XNNPACK lowering and the runtime."""
    args = (_randn(2, 3, 16, 16),)
    torch.manual_seed(0)
    ep = export(NeedsAll(), args)
    out, changed = ep, []
    for name, p in PASSES:
        res = p(out)
        out = res.ep
        changed += [name] * res.changed
    assert changed == [name for name, _ in PASSES]
    h = op_histogram(out)
    assert h[BN] == 1 and "aten.transpose.int" not in h and "aten.clone.default" not in h
    assert "aten.sigmoid.default" not in h and "aten.t.default" not in h and "aten.exp.default" not in h
    got = run(out, args)
    assert rel_err(run(ep, args), got) <= REL_TOL
    loaded = save_load(out, tmp_path / "all.pt2")
    assert rel_err(got, lower_and_run(loaded, args)) <= PTE_REL_TOL


def test_fuse_conv_bn(pass_runs: dict[str, PassRun]) -> None:
    r = pass_runs["fuse_conv_bn"]
    h = op_histogram(r.res.ep)
    # 4 BNs, 3 fusable (c3's output also feeds the skip add, so b3 stays)
    assert r.hist_before[BN] == 4 and h[BN] == 1
    assert node_count(r.res.ep) == node_count(r.before) - 3
    keys = set(r.res.ep.state_dict)  # BN state gone (incl. num_batches_tracked); b3's kept; bias-free c1 got one
    assert not any(k.startswith(("b1.", "b2.", "b4.")) for k in keys)
    assert {"b3.weight", "b3.running_var", "c1.bias", "c1.weight"} <= keys


def test_fuse_conv_bn_on_core_aten_form(tmp_path: Path) -> None:
    """run_decompositions() gives convolution + _native_batch_norm_legit_no_training + getitem."""
    args = (_randn(2, 3, 16, 16),)
    torch.manual_seed(0)
    ep = export(ConvBN(), args).run_decompositions()
    legit = "aten._native_batch_norm_legit_no_training.default"
    assert op_histogram(ep)[legit] == 4
    res = fuse_conv_bn(ep)
    assert res.changed and op_histogram(res.ep)[legit] == 1
    got = run(res.ep, args)
    assert rel_err(run(ep, args), got) <= REL_TOL
    assert max_abs_error(got, run(save_load(res.ep, tmp_path / "core.pt2"), args)) == 0.0


def test_fuse_with_shared_conv_weight(tmp_path: Path) -> None:
    """The conv weight is also read elsewhere: the fused weight becomes a new parameter."""

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bn(self.conv(x)) + nn.functional.conv2d(x, self.conv.weight, None, padding=1)

    args = (_randn(1, 4, 8, 8),)
    ep = export(Shared(), args)
    res = fuse_conv_bn(ep)
    assert res.changed and BN not in op_histogram(res.ep)
    assert {"conv.weight", "conv.weight_bn_fused", "conv.bias"} <= set(res.ep.state_dict)
    got = run(res.ep, args)
    assert rel_err(run(ep, args), got) <= REL_TOL
    assert max_abs_error(got, run(save_load(res.ep, tmp_path / "s.pt2"), args)) == 0.0


def test_cancel_permutes(pass_runs: dict[str, PassRun]) -> None:
    r = pass_runs["cancel_permutes"]
    assert r.hist_before["aten.permute.default"] == 4 and r.hist_before["aten.transpose.int"] == 3
    h = op_histogram(r.res.ep)
    # the pair and the transpose pair vanish, the 3-op cascade becomes one permute
    assert h.get("aten.permute.default") == 1 and "aten.transpose.int" not in h
    assert node_count(r.res.ep) == node_count(r.before) - 6
    perm = [n for n in r.res.ep.graph.nodes if n.target == torch.ops.aten.permute.default][0]
    assert list(perm.args[1]) == [0, 3, 1, 2]


def test_remove_redundant_copies(pass_runs: dict[str, PassRun]) -> None:
    r = pass_runs["remove_redundant_copies"]
    h = op_histogram(r.res.ep)
    # export already drops contiguous() on a contiguous tensor; the one after the permute stays
    assert r.hist_before["aten.contiguous.default"] == 1 and h["aten.contiguous.default"] == 1
    assert r.hist_before["aten.clone.default"] == 3 and h["aten.clone.default"] == 1  # channels_last stays
    assert r.hist_before["aten.to.dtype"] == 1 and "aten.to.dtype" not in h
    assert node_count(r.res.ep) == node_count(r.before) - 3


def test_copy_from_input_to_output_is_kept() -> None:
    class InOut(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.clone(), x * 2

    ep = torch.export.export(InOut(), (_randn(3),))
    assert not remove_redundant_copies(ep).changed  # else the output would alias the input


def test_remove_dead_code(pass_runs: dict[str, PassRun]) -> None:
    r = pass_runs["remove_dead_code"]
    assert r.hist_before["aten.sigmoid.default"] == 1
    assert op_histogram(r.res.ep) == {"aten.linear.default": 1}
    assert node_count(r.before) - node_count(r.res.ep) == 3
    assert set(r.res.ep.state_dict) == {"fc.weight", "fc.bias"}  # unused_fc.* dropped


def test_dead_code_keeps_side_effects() -> None:
    class Asserting(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._assert_async(x.sum() > -1e30)  # result unused, but a side effect
            return x + 1

    ep = torch.export.export(Asserting(), (_randn(3),))
    assert not remove_dead_code(ep).changed


def test_fold_constants(pass_runs: dict[str, PassRun]) -> None:
    r = pass_runs["fold_constants"]
    assert op_histogram(r.res.ep) == {"aten.matmul.default": 1, "aten.mul.Tensor": 1}  # t, *2 and exp folded
    assert node_count(r.before) - node_count(r.res.ep) == 3
    assert set(r.res.ep.state_dict) == {"w_folded", "log_scale_folded"}  # originals dropped
    assert count_params(r.res.ep) == count_params(r.before)


def test_fold_agrees_with_executorch_constant_prop(pass_runs: dict[str, PassRun]) -> None:
    """executorch's constant_prop_pass does run on ATen float programs: same resulting ops."""
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    r = pass_runs["fold_constants"]
    assert op_histogram(constant_prop_pass(copy.deepcopy(r.before))) == op_histogram(r.res.ep)


def test_fold_keeps_layout_ops_on_weights_for_xnnpack() -> None:
    """Decomposed linear is permute(w) -> addmm: folding the permute breaks XNNPACK's ConvertToLinearPass
    ("a and b must have same reduction dim"), so a pure view/permute of a weight is never folded. The program is
    returned unchanged (same object), so there is nothing new to lower."""
    torch.manual_seed(0)
    ep = export(MLP(), (_randn(2, 64),)).run_decompositions()
    assert "aten.permute.default" in op_histogram(ep)
    res = fold_constants(ep)
    assert not res.changed and res.ep is ep


def test_fold_skips_random_and_creation_ops() -> None:
    class R(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand(3) * 0 + torch.zeros(3)

    assert not fold_constants(torch.export.export(R(), (_randn(3),))).changed


# ---------------------------------------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------------------------------------


def test_sample_cnn_all_passes(cnn: Any, tmp_path: Path) -> None:
    """BN in residual blocks: every BN fuses; the result unflattens, decomposes, round-trips and lowers."""
    model, args, ep = cnn
    n_bn = op_histogram(ep)[BN]
    out = run_all_passes(ep, args)
    assert n_bn == 6 and BN not in op_histogram(out)
    assert node_count(out) == node_count(ep) - n_bn
    ref = run(ep, args)
    assert rel_err(ref, run(out, args)) <= REL_TOL
    assert rel_err(ref, torch.export.unflatten(out)(*args).detach()) <= REL_TOL  # module_call_graph consistent
    assert rel_err(ref, run(out.run_decompositions(), args)) <= REL_TOL
    loaded = save_load(out, tmp_path / "cnn.pt2")
    assert rel_err(model(*args).detach(), lower_and_run(loaded, args)) <= PTE_REL_TOL
    assert count_macs(out) == count_macs(ep)  # fusion does not change conv MACs


def test_mlp_passes_are_noops() -> None:
    ep = export(MLP(), (_randn(2, 64),))
    for name, p in PASSES:
        res = p(ep)
        assert not res.changed and res.ep is ep, name


def test_training_mode_program_is_left_alone() -> None:
    """Train-mode BN normalizes with batch statistics and updates its buffers in place: no fusion, and the in-place
    updates are not dead code."""
    ep = torch.export.export(ConvBN().train(), (_randn(2, 3, 8, 8),))
    for name, p in PASSES:
        assert not p(ep).changed, name


def test_in_place_updates_block_folding_and_copy_removal() -> None:
    """export's default IR keeps in-place ops: a buffer updated with add_ is not a constant, and a clone that is
    then modified in place (or whose source is) protects the other side."""

    class InPlace(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            y.add_(1)
            a = x * 2
            b = a.clone()  # keeps the value before the next line
            a.view(-1).mul_(3)
            c = self.count * 2
            self.count.add_(1)
            return x + y + c + a + b

    ep = torch.export.export(InPlace(), (_randn(3),))
    h = op_histogram(ep)
    assert h["aten.add_.Tensor"] == 2 and h["aten.clone.default"] == 2
    for name, p in PASSES:
        assert not p(ep).changed, name


def test_dynamic_batch() -> None:
    model, args = build_builtin("small_cnn")
    x = _randn(2, 3, 32, 32)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("b", min=1, max=8)},))
    out = run_all_passes(ep, (x,))
    assert BN not in op_histogram(out)
    x5 = _randn(5, 3, 32, 32, seed=5)
    assert rel_err(run(ep, (x5,)), run(out, (x5,))) <= REL_TOL
    assert count_macs(ep)[0] == eager_macs(model, (x,))  # dynamic dims counted at the example size


# ---------------------------------------------------------------------------------------------------------------------
# Quantized programs: PT2E (XNNPACKQuantizer) and torchao int4 weights
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_pt2e_program_passes(cnn: Any, qep: torch.export.ExportedProgram, tmp_path: Path) -> None:
    """Quant ops are never folded; the fp32 weights the re-export keeps unused are dropped."""
    for p in (fold_constants, fuse_conv_bn, cancel_permutes, remove_redundant_copies):
        assert not p(qep).changed, p.__name__
    res = remove_dead_code(qep)
    assert res.changed and op_histogram(res.ep) == op_histogram(qep)
    assert not any(k.endswith(".weight") for k in res.ep.state_dict)  # fp32 copies gone
    assert weight_bytes(res.ep) == weight_bytes(qep)  # only unused state left
    args = cnn[1]
    got = run(res.ep, args)
    assert max_abs_error(run(qep, args), got) == 0.0
    assert saved_size(res.ep, tmp_path / "after.pt2") < saved_size(qep, tmp_path / "q.pt2")
    assert rel_err(got, lower_and_run(res.ep, args)) <= PTE_REL_TOL


def test_executorch_constant_prop_destroys_pt2e_weights(qep: torch.export.ExportedProgram) -> None:
    """Pitfall, kept as a guard: its skip list holds Edge quant ops only, so on an ATen PT2E program it folds
    dequantize_per_channel(int8 weight) into fp32 constants (hence fold_constants of our own)."""
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    dq = "quantized_decomposed.dequantize_per_channel.default"
    assert dq in op_histogram(qep)
    assert dq not in op_histogram(constant_prop_pass(copy.deepcopy(qep)))


def test_torchao_program_passes(torchao_mlp: Any) -> None:
    _, _, ep, args = torchao_mlp
    for name, p in PASSES:
        assert not p(ep).changed, name
    assert rel_err(run(ep, args), lower_and_run(ep, args)) <= 1e-2  # int8 activations on both sides


# ---------------------------------------------------------------------------------------------------------------------
# MACs / params / bytes
# ---------------------------------------------------------------------------------------------------------------------


def test_macs_convention_is_one_sentence() -> None:
    assert "flop_counter" in MACS_CONVENTION and "FLOPs/2" in MACS_CONVENTION and "\n" not in MACS_CONVENTION


def test_macs_float_matches_flop_counter(cnn: Any) -> None:
    model, args, ep = cnn
    total, per_node = count_macs(ep)
    assert total == eager_macs(model, args) == 43_352_704
    # C_out * C_in * k*k * H_out*W_out per conv, M*N*K for the linear; BN, relu, add and pooling count 0
    block1, block2 = 32 * 32 * 9 * 32 * 32, 64 * 64 * 9 * 16 * 16
    assert per_node == {"conv2d": 32 * 3 * 9 * 32 * 32, "conv2d_1": block1, "conv2d_2": block1,
                        "conv2d_3": 64 * 32 * 9 * 16 * 16, "conv2d_4": block2, "conv2d_5": block2, "linear": 64 * 10}
    assert count_macs(ep.run_decompositions())[0] == total  # convolution/addmm form too


@pytest.mark.parametrize("model,shape", [(MLP, (5, 64)), (Fold, (4, 16)), (ConvBN, (1, 3, 8, 8))])
def test_macs_match_flop_counter(model: type[nn.Module], shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    m, args = _randomize_bn(model()), (_randn(*shape),)
    assert count_macs(torch.export.export(m, args))[0] == eager_macs(m, args)


def test_macs_pt2e(cnn: Any, qep: torch.export.ExportedProgram) -> None:
    """Convs run on dequantized tensors: same MACs as the float model."""
    model, args, _ = cnn
    assert count_macs(qep)[0] == eager_macs(model, args)


def test_macs_torchao(torchao_mlp: Any) -> None:
    m, qm, ep, args = torchao_mlp
    assert count_macs(ep)[0] == eager_macs(m, args) == eager_macs(qm, args) == 2 * (64 * 128 + 128 * 32)


def test_count_params_and_bytes(cnn: Any, qep: torch.export.ExportedProgram) -> None:
    model, _, ep = cnn
    n_float = sum(p.numel() for p in model.parameters())
    bn_channels = sum(m.num_features for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    assert count_params(ep) == n_float
    assert weight_bytes(ep) == 4 * (n_float + 2 * bn_channels)  # + BN running stats
    # fusion: BN weight+bias (2 per channel) become one conv bias per channel (the convs are bias-free)
    fused = fuse_conv_bn(ep).ep
    assert count_params(fused) == n_float - bn_channels and weight_bytes(fused) == 4 * count_params(fused)
    # PT2E folds BN into conv during prepare_pt2e: same count as the fused float program
    assert count_params(qep) == count_params(fused)
    conv_fc_w = sum(m.weight.numel() for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear)))
    assert conv_fc_w <= weight_bytes(qep) < weight_bytes(fused)  # int8 weights: 1 byte each, plus scales/biases


def test_count_params_torchao(torchao_mlp: Any) -> None:
    m, _, ep, _ = torchao_mlp
    assert count_params(ep) == sum(p.numel() for p in m.parameters())
    wq = 64 * 128 + 128 * 32  # int4 values stored unpacked in int8
    groups = 128 * (64 // 32) + 32 * (128 // 32)  # one fp32 scale + one int8 zero-point each
    assert weight_bytes(ep) == wq + groups * (4 + 1) + 4 * (128 + 32)


# ---------------------------------------------------------------------------------------------------------------------
# Why np has its own passes: executorch's are no-ops on ATen programs
# ---------------------------------------------------------------------------------------------------------------------


def test_executorch_edge_passes_are_noops_on_aten(pass_runs: dict[str, PassRun]) -> None:
    """Regression guard: if a later executorch matches ATen ops, this fails and the choice can be reviewed."""
    from executorch.backends.transforms.fuse_batch_norm_with_conv import FuseBatchNormWithConvPass
    from executorch.backends.transforms.fuse_cascaded_transpose_or_permute_ops import (
        FuseCascadedTransposeOrPermuteOps,
    )
    from executorch.backends.transforms.remove_clone_ops import RemoveCloneOpsTransform

    makers = {"fuse_conv_bn": FuseBatchNormWithConvPass,
              "cancel_permutes": lambda ep: FuseCascadedTransposeOrPermuteOps(),
              "remove_redundant_copies": lambda ep: RemoveCloneOpsTransform()}
    for name, make in makers.items():
        base = copy.deepcopy(pass_runs[name].before)  # the executorch passes edit in place
        for ep in (base, base.run_decompositions()):
            before = op_histogram(ep)
            make(ep)(ep.graph_module)
            assert op_histogram(ep) == before, name


def test_passes_keep_a_placeholder_named_like_a_builtin() -> None:
    """nn.Sequential's argument is `input`, which deepcopy renames `input_1` in the graph while the signature keeps
    `input`: a pass, and graph_quantize (which ends with remove_dead_code), used to fail with KeyError: 'input_1'."""
    from np_optimizer.quantize.pt2e import quantize_program

    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10)).eval()
    x = torch.randn(1, 1, 8, 8)
    program = torch.export.export(model, (x,))
    fused = fuse_conv_bn(program)
    assert fused.changed and max_abs_error(program.module()(x), fused.ep.module()(x)) <= 1e-5 * float(
        program.module()(x).abs().max())
    quantized = quantize_program(fused.ep, backend="xnnpack", scheme="W8-A8", target=None, calibration=[(x,)])
    assert [n for n in quantized.graph.nodes if n.op == "placeholder"][-1].name.startswith("input")
    assert quantized.module()(x).shape == (1, 10)
