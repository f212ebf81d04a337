"""Per-layer host times: the on-device method's traced pass (ETDump), joined to the layers through the compile's trace
map. A real small CNN measured on this machine, and one unit test of the join on events written here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.layers.host_times import DELEGATE_OVERHEAD, RUNTIME_FRAMING, host_layers
from np_optimizer.layers.reasons import cpu_summary, layer_reasons

_Traced = tuple[dict[str, Any], Any, dict[str, str], dict[str, Any]]


def _cnn() -> tuple[Any, tuple[Any, ...]]:
    """Convolutions XNNPACK takes, an average pool with ceil_mode, which XNNPACK's partitioner refuses (portable CPU
    kernel), and a cumsum, for which XNNPACK has no kernel."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.bn = nn.BatchNorm2d(16)
            self.pool = nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True)
            self.block = nn.Conv2d(16, 16, 3, padding=1)
            self.head = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.block(self.pool(torch.relu(self.bn(self.stem(x))))))
            return self.head(y.mean(dim=(2, 3))).cumsum(1)

    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 3, 64, 64),)


@pytest.fixture(scope="module")
def traced_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any, dict[str, str], dict[str, Any]]:
    """The CNN compiled for host and measured once with 20 traced runs: (layers document, output, module classes, the
    compile's layers_graph.json)."""
    import logging

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.layers.files import read_layers
    from np_optimizer.layers.graph import GRAPH_FILE
    from np_optimizer.layers.reasons import read_graph
    from np_optimizer.profiler.methods import get_method
    from np_optimizer.profiler.request import ProfileRequest

    base = tmp_path_factory.mktemp("host_times")
    model, example = _cnn()
    program = save_program(export_model(model, example), base / "cnn.pt2")
    compiled = compile_checkpoint(program, get_device("host"), base / "compiled")
    assert compiled.status == "ok" and (base / "compiled" / "model.etrecord").is_file()
    # The untraced median and the traced runs are taken one after the other; when the machine's load changes between
    # them (the other test worker starting a compile), the traced runs' own median moves away from the untraced one
    # by far more than tracing costs (2-6%). Such a round is measured again, at most twice, as a user would.
    for attempt in range(3):
        work = base / f"round{attempt}"
        request = ProfileRequest(checkpoint="INPUT_MODEL", job="00_input_model", program_path=program,
                                 program_sha256="0" * 64, compiled=compiled, compiled_dir=base / "compiled",
                                 device=get_device("host"), options={"num_executions": 30, "num_layer_executions": 20,
                                                                     "threads": 1, "timeout": 120},
                                 work_dir=work, log=logging.getLogger("np.T"))
        output = get_method("on-device").profile(request)
        assert output.artifacts.get("layers") and (work / "trace.etdp").is_file(), output.warnings
        if abs(output.extras["layer_times"]["tracing_cost_pct"]) <= 20:
            break
    classes = {name: type(module).__name__ for name, module in model.named_modules()}
    graph = read_graph(base / "compiled" / GRAPH_FILE)
    return read_layers(work / output.artifacts["layers"]), output, classes, graph


def test_rows_are_keyed_by_module_paths_and_add_up(traced_round: _Traced) -> None:
    document, output, classes, _graph = traced_round
    owned = [e for e in document["layers"] if not e["unowned"]]
    assert {e["module"] for e in owned} <= set(classes) and {"stem", "pool", "block", "head"} <= {
        e["module"] for e in owned}
    for entry in owned:
        assert entry["module"] == "" or entry["class"] == classes[entry["module"]], entry
    assert document["cost"]["unit"] == "ms" and document["traced_runs"] == 20
    ratios = document["ratios"]
    # the rows cover the traced execute but for the gaps between events: 1-2% on a quiet machine, 4% seen with the
    # two cores shared by three busy processes (the gaps grow with preemption, the rows do not)
    assert abs(ratios["rows_vs_traced_execute"] - 1.0) <= 0.06, ratios
    # traced vs untraced runs are taken at different moments: on a busy machine their ratio has been anything from
    # 0.57 to 1.19 in make test, so how close they come is bench/layers_host.py's figure; here only that it is given
    assert ratios["layers_vs_untraced_median"] > 0 and math.isfinite(ratios["tracing_cost_pct"]), ratios
    assert output.extras["layer_times"]["traced_runs"] == 20
    assert "etdump_b64" not in str(output.extras)  # the trace went to trace.etdp, not into the record


def test_the_op_left_outside_the_delegate_is_named_with_its_cost(traced_round: _Traced) -> None:
    document, _output, _classes, _graph = traced_round
    first = document["layers"][0]
    assert first["key"] == "pool" and first["placement"] == "CPU (portable)" and first["time_ms"] > 0
    assert first["raw_ids"] == ["aten::avg_pool2d.out"]
    stem = next(e for e in document["layers"] if e["key"] == "stem")
    assert stem["placement"] == "XNNPACK" and any(r.startswith("Convolution") for r in stem["raw_ids"])


def test_each_op_left_outside_xnnpack_has_its_reason(traced_round: _Traced) -> None:
    """XNNPACK's partitioner's own words where it says why (the pool's ceil mode), else that it has no kernel for the
    op (the mean without keepdim, too); and the summary line gives the left ops' share of the measured time, the costliest first."""
    document, _output, _classes, graph = traced_round
    assert layer_reasons(graph) == {"pool": "ceil mode is not supported",
                                    "(model).mean": "mean.dim only supports keepdim=True",
                                    "(model).cumsum": "no XNNPACK kernel for aten.cumsum"}
    assert all(op.get("reason") is None for op in graph["ops"] if op["delegated"])
    left = cpu_summary(graph, document)
    assert left is not None and left.startswith("3 ops left XNNPACK ("), left
    share = float(left.split("(", 1)[1].split("%")[0])
    pool = next(e for e in document["layers"] if e["key"] == "pool")
    assert "% of the measured time)" in left and share >= pool["share_pct"] * 0.99 - 0.1, (left, pool)
    assert "costliest: pool (AvgPool2d): ceil mode is not supported. To do: pool with ceil_mode=False" in left


def _graph_op(key: str, handle: int, delegate: int | None, family: str = "convolution") -> dict[str, Any]:
    return {"key": key, "module": key, "class": "Conv2d", "family": family, "op_family": family,
            "overhead": False, "delegated": delegate is not None, "delegate": delegate, "handle": handle, "macs": 10}


def test_the_join_gives_inserted_ops_to_their_producer_and_keeps_unowned_time_apart() -> None:
    """A delegate of a transpose (inserted), conv a and conv b, then a portable kernel; two runs."""
    trace = {"instructions": [
        {"id": 0, "kind": "delegate", "delegate": 0, "backend": "XnnpackBackend", "handles": [1, 2], "ops": [
            {"type": "XNNStaticTranspose", "handle": 65535, "inputs": [0], "output": 1},
            {"type": "XNNConv2d", "handle": 1, "inputs": [1], "output": 2},
            {"type": "XNNConv2d", "handle": 2, "inputs": [2], "output": 3},
            {"type": "XNNStaticTranspose", "handle": 65535, "inputs": [3], "output": 4}]},
        {"id": 1, "kind": "kernel", "op": "aten::sort.values", "handles": [3]}]}
    graph = {"ops": [_graph_op("a", 1, 0), _graph_op("b", 2, 0), _graph_op("s", 3, None, "sort")]}

    def run(scale: int) -> list[dict[str, Any]]:
        def ev(name: str | None, instruction: int, op: str | None, us: int) -> dict[str, Any]:
            return {"name": name, "instruction": instruction, "delegate_op": op, "ns": us * 1000 * scale}
        return [ev(None, 0, "Transpose (ND, X32) #1", 1), ev(None, 0, "Convolution (NHWC) #1", 5),
                ev(None, 0, "Convolution (NHWC) #2", 3), ev(None, 0, "Transpose (ND, X32) #2", 2),
                ev("DELEGATE_CALL", 0, None, 12), ev("native_call_sort.out", 1, None, 19),
                ev("OPERATOR_CALL", 1, None, 20), ev("Method::execute", 0, None, 33)]

    document = host_layers([run(1), run(1)], trace, graph, untraced_median_ms=0.033, tool="ExecuTorch test")
    by_key = {e["key"]: e for e in document["layers"]}
    # the first transpose reads the graph input: it goes to its consumer a; the last one to its producer b
    assert by_key["a"]["time_ms"] == pytest.approx(0.006) and by_key["a"]["overhead_cost"] == pytest.approx(0.001)
    assert by_key["b"]["time_ms"] == pytest.approx(0.005) and by_key["b"]["overhead_cost"] == pytest.approx(0.002)
    assert by_key["s"]["time_ms"] == pytest.approx(0.020) and by_key["s"]["placement"] == "CPU (portable)"
    assert by_key[DELEGATE_OVERHEAD]["time_ms"] == pytest.approx(0.001) and by_key[DELEGATE_OVERHEAD]["unowned"]
    assert by_key[RUNTIME_FRAMING]["time_ms"] == pytest.approx(0.001)
    assert document["ratios"]["rows_vs_traced_execute"] == pytest.approx(1.0)
    assert document["ratios"]["layers_vs_untraced_median"] == pytest.approx(31 / 33)
    assert [e["key"] for e in document["layers"]][:3] == ["s", "a", "b"]


def test_no_traced_runs_is_said_not_faked(tmp_path: Path) -> None:
    from np_optimizer.profiler.methods.on_device import _no_layer_costs

    assert _no_layer_costs({"artifacts": {"layers": "layers.json"}}) is None
    assert "num_layer_executions" in str(_no_layer_costs({"artifacts": {}, "extras": {}}))
