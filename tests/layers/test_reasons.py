"""The reasons' views on a hand-written layers_graph.json (pure: the real partitioners' reasons are pinned on real
lowerings in test_npu_partitions.py, test_layers.py and test_host_times.py): which ops count as left, the reason per
layer, and the summary line's count, share and costliest op."""

from __future__ import annotations

from typing import Any

from np_optimizer.layers.reasons import advice, cpu_summary, layer_reasons, left_ops


def _op(key: str, op: str, *, delegated: bool = False, macs: int = 0, reason: str | None = None) -> dict[str, Any]:
    return {"key": key, "module": key, "class": "Conv2d", "op": op, "delegated": delegated, "macs": macs,
            **({"reason": reason} if reason else {})}


GRAPH = {"accelerator": "the NPU", "ops": [
    _op("conv", "aten.convolution", delegated=True, macs=900),
    _op("conv", "quantized_decomposed.dequantize_per_tensor"),  # a boundary dq: left, but no work and no reason
    _op("head", "aten.addmm", macs=80, reason="Linear needs int8 input"),
    _op("head", "aten.sort", reason="Not included in BaseTOSASupportList or a registered tosa_support_check"),
    _op("tail", "aten.cumsum", macs=20, reason="Not included in BaseTOSASupportList or a registered tosa_support_check"),
]}


def test_only_ops_with_a_reason_count_and_a_layer_lists_its_reasons_costliest_first() -> None:
    assert [o["op"] for o in left_ops(GRAPH)] == ["aten.addmm", "aten.sort", "aten.cumsum"]
    assert layer_reasons(GRAPH) == {
        "head": "Linear needs int8 input; Not included in BaseTOSASupportList or a registered tosa_support_check",
        "tail": "Not included in BaseTOSASupportList or a registered tosa_support_check"}


def test_the_summary_gives_the_cost_share_where_known_else_the_macs() -> None:
    by_macs = cpu_summary(GRAPH, {"cost": {"unit": "cycles", "total": 1000}, "rows": []})
    assert by_macs is not None and by_macs.startswith(
        "3 ops left the NPU (10.0% of the MACs, not estimated); costliest: head (Conv2d): Linear needs int8 input. "
        "To do: "), by_macs
    measured = {"cost": {"field": "time_ms", "unit": "ms", "total": 2.0}, "rows": [
        {"key": "tail", "placement": "CPU (portable)", "time_ms": 0.5},
        {"key": "head", "placement": "CPU (portable)", "time_ms": 0.1},
        {"key": "conv", "placement": "XNNPACK", "time_ms": 1.4}]}
    timed = cpu_summary(GRAPH, measured)
    assert timed is not None and "(30.0% of the measured time); costliest: tail (Conv2d): Not included" in timed
    assert cpu_summary({"ops": [_op("conv", "aten.convolution", delegated=True)]}) is None  # nothing left
    assert cpu_summary({"ops": [_op("a", "aten.relu", reason="float"), _op("b", "aten.relu", reason="float")]}) \
        .startswith("all 2 ops left the delegate (none of the MACs np counts)")  # type: ignore[union-attr]


def test_advice_follows_the_reason() -> None:
    assert advice("Avgpool2d with padding needs kernel dims < 8, got [24, 5]", "the NPU").startswith("pool with a kernel")
    assert advice("no XNNPACK kernel for aten.cumsum", "XNNPACK").startswith("replace the op")
    assert advice("Had torch.bool output that is not supported by TOSA-1.0+INT+int16+int4+u55.", "the NPU") \
        .startswith("the target has no boolean tensors")  # a ViT's attention mask on the U55
    assert advice("something new", "the NPU") == "change the layer to meet the condition the reason names, so that " \
        "the NPU takes it"
