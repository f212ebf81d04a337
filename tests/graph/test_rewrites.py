"""graph_optimize's target rewrites (graph/rewrites/) on both device kinds, with real torch.export, PT2E W8-A8 and the
backends' own lowerings in-process: on the target that refuses a pattern, the rewrite keeps the outputs within GO's
tolerance and the layer goes from the CPU into the delegate; on a target that takes the pattern, the program is left
as it is (the same object) and the pattern lowers whole.

The rewrites a device gets are chosen as graph_optimize chooses them: its backend's `rewrites`, each given its target
profile (`_go_rewrites`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from np_optimizer.devices import get_device
from np_optimizer.graph.delegation import delegation_stats
from np_optimizer.graph.passes import PassResult
from np_optimizer.graph.program_io import export_model
from np_optimizer.graph.rewrites import REWRITES, Target, rewrite_for, rewrites_of
from np_optimizer.graph.rewrites.pools import avg_pool_as_mean
from np_optimizer.layers.reasons import advice
from np_optimizer.quantize.pt2e import quantize_program

GO_TOLERANCE = 1e-4  # graph_optimize's default: max-abs change relative to the largest output magnitude
POOL_REASON = "Avgpool2d with padding needs kernel dims < 8, got [24, 5]"
MEAN_REASON = "mean.dim only supports keepdim=True"
U55, U85, CPU = "corstone_300", "alif_e8", "raspberry_pi_5"


class Separable(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.pw(torch.relu(self.dw(x))))


class Kws(nn.Module):
    """tests/layers/test_npu_partitions.py's keyword spotter: a (24, 5) pool on the 25x5 map does not tile it."""

    def __init__(self, pool: tuple[int, int] = (24, 5)) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 32, (10, 4), stride=2, padding=(5, 1))
        self.blocks = nn.Sequential(Separable(32))
        self.pool = nn.AvgPool2d(pool)
        self.classifier = nn.Linear(32, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.blocks(torch.relu(self.conv(x)))), 1))


class MeanHead(nn.Module):
    """The zoo's package model's head (tests/models/test_zoo.py): `x.mean((2, 3))` before a linear layer."""

    def __init__(self, keepdim: bool = False) -> None:
        super().__init__()
        self.keepdim = keepdim
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean((2, 3), keepdim=self.keepdim).flatten(1))


def _export(model: nn.Module, shape: tuple[int, ...]) -> tuple[Any, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model.eval()
    example = (torch.randn(*shape),)
    return export_model(model, example), example


def _kws_with(pool: nn.Module) -> Any:
    """The keyword spotter with another pool, its classifier sized to what the pool gives."""
    model = Kws()
    model.pool = pool  # type: ignore[assignment]
    model.classifier = nn.LazyLinear(12)  # type: ignore[assignment]
    with torch.no_grad():
        model(torch.randn(1, 1, 49, 10))  # the lazy layer takes its size
    return _export(model, (1, 1, 49, 10))


def _go_rewrites(program: Any, device: str) -> tuple[Any, list[tuple[str, PassResult]]]:
    """Every rewrite graph_optimize runs on `device`, in its order: (the program, each rewrite's result)."""
    row = get_device(device)
    results = []
    for rewrite in rewrites_of(row.backend_spec.rewrites):
        result = rewrite.run(program, Target(row.mlia_target))
        results.append((rewrite.name, result))
        program = result.ep
    return program, results


def _within_go_tolerance(before: Any, after: Any, example: tuple[torch.Tensor, ...]) -> None:
    torch.manual_seed(1)
    for x in (example, *((torch.randn_like(example[0]),) for _ in range(4))):
        with torch.no_grad():
            ref, out = before.module()(*x), after.module()(*x)
        assert float((ref - out).abs().max()) <= GO_TOLERANCE * float(ref.abs().max())


def _left_out(program: Any, device: str, example: tuple[torch.Tensor, ...], tmp: Path) -> tuple[set[str], set[str]]:
    """W8-A8 with the device's quantizer, lowered with its backend: (the ops of work left outside the delegates,
    the partitioner's reasons)."""
    row = get_device(device)
    quantized = quantize_program(program, backend=row.backend, scheme="W8-A8", target=row.mlia_target,
                                 calibration=[example])
    lowered = row.backend_spec.lower(quantized, row.mlia_target, tmp)
    outside = delegation_stats(lowered.edge.exported_program())["non_delegated_histogram"]
    return {op for op in outside if op.startswith("aten.")}, set(lowered.rejected.values())


@pytest.fixture(scope="module")
def kws() -> tuple[Any, tuple[torch.Tensor, ...]]:
    return _export(Kws(), (1, 1, 49, 10))


# avg_pool_as_mean


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_the_u55_pool_goes_to_the_npu_as_a_slice_and_a_mean(kws: Any, tmp_path: Path) -> None:
    program, example = kws
    assert _left_out(program, U55, example, tmp_path / "before") == ({"aten.avg_pool2d"}, {POOL_REASON})
    rewritten, results = _go_rewrites(program, U55)
    assert [(name, r.layers) for name, r in results if r.changed] == [("avg_pool_as_mean", ("pool",))]
    ops = [str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"]
    assert "aten.avg_pool2d.default" not in ops and "aten.mean.dim" in ops and "aten.slice.Tensor" in ops
    mean = next(n for n in rewritten.graph.nodes if str(n.target) == "aten.mean.dim")
    assert list(mean.meta["nn_module_stack"].values())[-1][0] == "pool"  # the layer keeps its module path
    _within_go_tolerance(program, rewritten, example)
    assert _left_out(rewritten, U55, example, tmp_path / "after") == (set(), set())


def test_a_pool_that_tiles_its_map_but_strides_over_3_is_rewritten_for_the_u55() -> None:
    """A (25, 5) pool on the 25x5 map: no padding, but the U55 refuses its stride ("Avgpool2d needs stride <= 3");
    the mean needs no slice."""
    program, example = _export(Kws((25, 5)), (1, 1, 49, 10))
    rewritten, results = _go_rewrites(program, U55)
    assert dict(results)["avg_pool_as_mean"].changed
    ops = [str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"]
    assert "aten.mean.dim" in ops and "aten.slice.Tensor" not in ops and "aten.avg_pool2d.default" not in ops
    _within_go_tolerance(program, rewritten, example)


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_windows_side_by_side_become_one_mean_each_for_the_u55(tmp_path: Path) -> None:
    """A (12, 5) pool on the 25x5 map: two windows, the last row read by none (the Arm lowering pads it: refused for
    the kernel over 8). Written as the 24 rows the windows read and an adaptive pool to (2, 1), the U55 takes it."""
    program, example = _kws_with(nn.AvgPool2d((12, 5)))
    assert _left_out(program, U55, example, tmp_path / "before") == (
        {"aten.avg_pool2d"}, {"Avgpool2d with padding needs kernel dims < 8, got [12, 5]"})
    rewritten, results = _go_rewrites(program, U55)
    assert dict(results)["avg_pool_as_mean"].changed
    ops = [str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"]
    assert "aten.adaptive_avg_pool2d.default" in ops and "aten.avg_pool2d.default" not in ops
    _within_go_tolerance(program, rewritten, example)
    assert _left_out(rewritten, U55, example, tmp_path / "after") == (set(), set())


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_a_target_that_takes_the_pool_keeps_it(kws: Any, tmp_path: Path) -> None:
    """The U85 and XNNPACK take the (24, 5) pool: the program is not rewritten (and the U85 lowers it whole)."""
    program, example = kws
    for device in (U85, CPU):
        rewritten, results = _go_rewrites(program, device)
        assert rewritten is program and not any(r.changed for _name, r in results)
    assert _left_out(program, U85, example, tmp_path) == (set(), set())


@pytest.mark.parametrize("pool", [nn.AvgPool2d(2), nn.AvgPool2d((24, 5), stride=1),
                                  nn.AvgPool2d((12, 5), ceil_mode=True), nn.AvgPool2d((24, 5), padding=(1, 0))])
def test_a_pool_the_u55_takes_or_one_no_mean_per_window_computes_is_left_alone(pool: nn.Module) -> None:
    """A 2x2 pool the U55 takes; pools the U55 refuses whose windows are not the means of slices: overlapping (a
    (24, 5) pool with stride 1), a partial window at the edge (ceil mode), padding."""
    program, _example = _kws_with(pool)
    assert avg_pool_as_mean(program, Target(get_device(U55).mlia_target)) == PassResult(program, False)


# mean_keepdim


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_the_xnnpack_mean_goes_to_the_delegate_with_keepdim(tmp_path: Path) -> None:
    program, example = _export(MeanHead(), (1, 3, 16, 16))
    assert _left_out(program, CPU, example, tmp_path / "before") == ({"aten.mean.dim"}, {MEAN_REASON})
    rewritten, results = _go_rewrites(program, CPU)
    assert [(name, r.layers) for name, r in results if r.changed] == [("mean_keepdim", ("(model).mean",))]
    mean = next(n for n in rewritten.graph.nodes if str(n.target) == "aten.mean.dim")
    assert mean.args[2] is True
    _within_go_tolerance(program, rewritten, example)
    assert _left_out(rewritten, CPU, example, tmp_path / "after") == (set(), set())


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_the_npu_takes_the_mean_as_written(tmp_path: Path) -> None:
    """The Arm backend lowers a mean without keepdim (a sum and a multiply): graph_optimize leaves it for both NPUs."""
    program, example = _export(MeanHead(), (1, 3, 16, 16))
    for device in (U55, U85):
        rewritten, _results = _go_rewrites(program, device)
        assert rewritten is program
    assert _left_out(program, U55, example, tmp_path) == (set(), set())


def test_a_mean_xnnpack_takes_is_left_alone() -> None:
    program, _example = _export(MeanHead(keepdim=True), (1, 3, 16, 16))
    rewritten, _results = _go_rewrites(program, CPU)
    assert rewritten is program


# avg_pool_for_xnnpack


class PoolNet(nn.Module):
    def __init__(self, pool: nn.Module, smooth: nn.Module | None = None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = pool
        self.smooth = smooth or nn.Identity()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.smooth(self.pool(torch.relu(self.conv(x)))))


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_the_xnnpack_pools_go_to_the_delegate(tmp_path: Path) -> None:
    """`pool`: ceil mode that adds no window on the 16x16 map; `smooth`: padding counted in the average."""
    program, example = _export(PoolNet(nn.AvgPool2d(2, ceil_mode=True), nn.AvgPool2d(3, stride=1, padding=1)),
                               (1, 3, 16, 16))
    assert _left_out(program, CPU, example, tmp_path / "before") == (
        {"aten.avg_pool2d"},
        {"ceil mode is not supported", "zero-padding in the averaging calculation is not supported"})
    rewritten, results = _go_rewrites(program, CPU)
    assert [(name, r.layers) for name, r in results if r.changed] == [("avg_pool_for_xnnpack", ("pool", "smooth"))]
    _within_go_tolerance(program, rewritten, example)
    assert _left_out(rewritten, CPU, example, tmp_path / "after") == (set(), set())


def test_a_ceil_mode_that_adds_a_window_and_the_npu_pools_are_left_alone() -> None:
    """On a 15x15 map ceil mode adds a last window of fewer values (another divisor): no rewrite. The Ethos-U
    backends take both pools above: their devices do not get the rewrite."""
    program, _example = _export(PoolNet(nn.AvgPool2d(2, ceil_mode=True)), (1, 3, 15, 15))
    assert _go_rewrites(program, CPU)[0] is program
    for pool in (nn.AvgPool2d(2, ceil_mode=True), nn.AvgPool2d(3, stride=1, padding=1)):
        program, _example = _export(PoolNet(pool), (1, 3, 16, 16))
        assert all(_go_rewrites(program, device)[0] is program for device in (U55, U85))


# drop_constant_attention_mask


class Attention(nn.Module):
    """Self-attention the way a Hugging Face encoder called without a mask runs it (ViT, BERT with input ids only):
    the mask is built in the graph from `arange`, all True, and handed to scaled_dot_product_attention. `causal` builds
    one that masks (the upper triangle); `from_input` one that depends on the input."""

    def __init__(self, mask: str = "all_true") -> None:
        super().__init__()
        self.mask = mask
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        positions = torch.arange(n) + 0
        if self.mask == "causal":
            mask = positions[None, None, :, None] >= positions[None, None, None, :]
        elif self.mask == "from_input":
            mask = (x[:, None, :, :1] > -10).expand(1, 1, n, n)
        else:
            mask = (positions[None, None, :, None] >= 0).expand(1, -1, n, n)
        q, k, v = (t.view(1, n, 2, 8).transpose(1, 2) for t in self.qkv(x).split(16, dim=-1))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(1, n, 16))


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_an_attention_mask_that_masks_nothing_leaves_the_u55_cpu(tmp_path: Path) -> None:
    program, example = _export(Attention(), (1, 8, 16))
    outside, reasons = _left_out(program, U55, example, tmp_path / "before")
    assert "aten.where.self" in outside and reasons and all("torch.bool" in r for r in reasons), (outside, reasons)
    rewritten, results = _go_rewrites(program, U55)
    assert [(name, r.layers) for name, r in results if r.changed] == [
        ("drop_constant_attention_mask", ("(model).scaled_dot_product_attention",))]
    assert not [n for n in rewritten.graph.nodes if str(n.target).split(".")[:2] in (["aten", "arange"], ["aten", "ge"])]
    _within_go_tolerance(program, rewritten, example)
    assert _left_out(rewritten, U55, example, tmp_path / "after") == (set(), set())


@pytest.mark.heavy  # lowers for the device, before and after the rewrite
def test_an_attention_mask_that_masks_nothing_leaves_the_portable_kernels(tmp_path: Path) -> None:
    """On XNNPACK the mask's arange, ge and where have no kernel and run on ExecuTorch's portable ones: the rewrite
    removes them (what stays outside is scaled_dot_product_attention's own decomposition, with or without a mask)."""
    program, example = _export(Attention(), (1, 8, 16))
    before, _reasons = _left_out(program, CPU, example, tmp_path / "before")
    rewritten, results = _go_rewrites(program, CPU)
    assert [name for name, r in results if r.changed] == ["drop_constant_attention_mask"]
    _within_go_tolerance(program, rewritten, example)
    after, _reasons = _left_out(rewritten, CPU, example, tmp_path / "after")
    assert {"aten.arange.start_step", "aten.ge.Scalar"} <= before - after and after < before, (before, after)


@pytest.mark.parametrize("mask", ["causal", "from_input"])
def test_a_mask_that_masks_or_reads_the_input_is_kept(mask: str) -> None:
    program, _example = _export(Attention(mask), (1, 8, 16))
    for device in (U55, CPU):
        rewritten, _results = _go_rewrites(program, device)
        assert rewritten is program


# the registry and the reason line


def test_every_rewrite_a_backend_lists_is_registered() -> None:
    from np_optimizer.backends import backends

    listed = {name for backend in backends() for name in backend.rewrites}
    assert listed == set(REWRITES.names()) == {"avg_pool_as_mean", "avg_pool_for_xnnpack", "mean_keepdim",
                                               "drop_constant_attention_mask"}


@pytest.mark.parametrize(("reason", "name"), [
    (POOL_REASON, "avg_pool_as_mean"), ("Avgpool2d needs stride <= 3, got [25, 5]", "avg_pool_as_mean"),
    (MEAN_REASON, "mean_keepdim"), ("Maxpool2d needs stride <= 3, got [4, 4]", None),
    ("Had torch.bool output that is not supported by TOSA-1.0+INT+int16+int4+u55.", "drop_constant_attention_mask"),
    ("ceil mode is not supported", "avg_pool_for_xnnpack")])
def test_the_reason_line_names_the_rewrite_that_answers_it(reason: str, name: str | None) -> None:
    found = rewrite_for(reason)
    assert (found.name if found else None) == name
    text = advice(reason, "the NPU")
    assert (f"graph_optimize's rewrite {name} does this" in text) == (name is not None), text
