"""Per-layer host times: the on-device method's traced pass (ETDump), joined to the layers through the compile's trace
map. A real small CNN measured on this machine, and one unit test of the join on events written here."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.layers.host_times import (
    DELEGATE_OVERHEAD,
    OUTSIDE_EXECUTE,
    RUNTIME_FRAMING,
    estimate,
    host_layers,
    typical,
)
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
    assert compiled.status == "ok" and (base / "compiled" / "layers_trace.json").is_file()
    assert not (base / "compiled" / "model.etrecord").exists()  # the rows need none: made by np export --level inspect
    # The untraced median and the traced runs are taken one after the other; when the machine's load changes between
    # them (the other test worker starting a compile), the traced runs' own median moves away from the untraced one
    # by far more than tracing costs (2-6%), and preemption widens the gaps between the traced events (rows covering
    # 0.87 of the traced execute, seen once in make test with all three rounds disturbed). Such a round is measured
    # again, at most four times, as a user would; a round whose rows never add up still fails the test below.
    for attempt in range(5):
        work = base / f"round{attempt}"
        request = ProfileRequest(checkpoint="INPUT_MODEL", job="00_input_model", program_path=program,
                                 program_sha256="0" * 64, compiled=compiled, compiled_dir=base / "compiled",
                                 device=get_device("host"), options={"num_executions": 30, "num_layer_executions": 20,
                                                                     "threads": 1, "timeout": 120},
                                 work_dir=work, log=logging.getLogger("np.T"))
        output = get_method("on-device").profile(request)
        assert output.artifacts.get("layers") and (work / "trace.etdp").is_file(), output.warnings
        document = read_layers(work / output.artifacts["layers"])
        rows = document["ratios"]["rows_vs_traced_execute"]
        if abs(output.extras["layer_times"]["tracing_cost_pct"]) <= 20 and abs(rows - 1.0) <= 0.06:
            break
    classes = {name: type(module).__name__ for name, module in model.named_modules()}
    graph = read_graph(base / "compiled" / GRAPH_FILE)
    return document, output, classes, graph


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
    # the line's share is of the round's measured total (median call), the rows' share_pct of their own sum: under
    # load the two differ by a few %, so the pool is checked against the same total as the line
    pool_of_total = 100.0 * pool["cost"] / document["cost"]["total"]
    assert "% of the measured time)" in left and share >= pool_of_total - 0.1, (left, pool, document["cost"])
    assert "costliest: pool (AvgPool2d): ceil mode is not supported. To do: pool with ceil_mode=False" in left


def _measure(model: Any, example: tuple[Any, ...], base: Path, options: dict[str, Any], rounds: int = 1) -> tuple[Path, Any]:
    """`model` compiled for host and measured by the on-device method, again (up to `rounds`) while `options["again"]`
    says so of the output: (the last round's folder, its output)."""
    import logging

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.profiler.methods import get_method
    from np_optimizer.profiler.request import ProfileRequest

    again = options.pop("again", lambda _work, _output: False)
    program = save_program(export_model(model, example), base / "cnn.pt2")
    compiled = compile_checkpoint(program, get_device("host"), base / "compiled")
    assert compiled.status == "ok", compiled.reason
    for attempt in range(rounds):
        work = base / f"round{attempt}"
        request = ProfileRequest(checkpoint="INPUT_MODEL", job="00_input_model", program_path=program,
                                 program_sha256="0" * 64, compiled=compiled, compiled_dir=base / "compiled",
                                 device=get_device("host"), options={**options, "threads": 1, "timeout": 120},
                                 work_dir=work, log=logging.getLogger("np.T"))
        output = get_method("on-device").profile(request)
        if not again(work, output):
            break
    return work, output


def test_on_a_tiny_cnn_the_rows_add_up_to_the_measured_latency(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A LeNet-5 of about 30 us: XNNPACK reads most of its ops as 0 or 1 us. Every row (the layers, the delegate
    overhead, the framing, the time outside execute) together is within 15% of the round's untraced median latency,
    and each row names how its time was obtained. A round whose machine load changed between its timed and traced
    runs is measured again, at most twice, as a user would."""
    import torch
    from torch import nn

    from np_optimizer.layers.files import read_layers

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84),
                          nn.ReLU(), nn.Linear(84, 10)).eval()
    def off(work: Path, output: Any) -> bool:
        return bool(abs(read_layers(work / output.artifacts["layers"])["ratios"]["rows_vs_untraced_median"] - 1) > 0.15)

    work, output = _measure(model, (torch.randn(1, 1, 28, 28),), tmp_path,
                            {"num_executions": 200, "num_layer_executions": 100, "again": off}, rounds=3)
    document = read_layers(work / output.artifacts["layers"])
    ratio = document["ratios"]["rows_vs_untraced_median"]
    assert output.extras["latency_ms"]["median"] >= 0.010, output.extras["latency_ms"]
    assert abs(ratio - 1.0) <= 0.15, document["ratios"]
    by_key = {e["key"]: e for e in document["layers"]}
    outside = by_key[OUTSIDE_EXECUTE]
    assert outside["unowned"] and outside["estimator"] == "call-execute" and outside["time_ms"] > 0
    assert all(e["estimator"] in document["cost"]["estimators"] for e in document["layers"]), document["layers"]
    convs = [e for e in document["layers"] if e["module"] in ("0", "3")]
    assert len(convs) == 2 and all(e["estimator"] == "mean+trunc" for e in convs)
    assert sum(e["cost"] for e in document["layers"]) == pytest.approx(document["cost"]["row_sum"])
    # np report --layers: each row's estimator in a column, the codes shown explained below the table; --json keeps it
    from np_optimizer.cli.views.layers import show_layers
    from np_optimizer.records import LayersRecord

    record = LayersRecord("exp", "INPUT_MODEL", "host", "on-device", "measured", document["cost"], None,
                          tuple(document["layers"]), len(document["layers"]), "layers.json")
    show_layers(record, "table")
    table = capsys.readouterr().out
    assert "Estimator" in table and "(outside execute)" in table and "call-execute" in table
    assert "mean+trunc: mean over the typical runs" in " ".join(table.split())
    show_layers(record, "json")
    shown = json.loads(capsys.readouterr().out)
    assert {e["key"]: e["estimator"] for e in shown["layers"]}[OUTSIDE_EXECUTE] == "call-execute"
    from np_optimizer.report.html.layer_section import _table  # the HTML per-layer section's table

    html = str(_table(record))
    assert "<th scope=\"col\">Estimator</th>" in html and "<abbr title=\"mean over the typical runs" in html


def _graph_op(key: str, handle: int, delegate: int | None, family: str = "convolution") -> dict[str, Any]:
    return {"key": key, "module": key, "class": "Conv2d", "family": family, "op_family": family,
            "overhead": False, "delegated": delegate is not None, "delegate": delegate, "handle": handle, "macs": 10}


def _join_case() -> tuple[dict[str, Any], dict[str, Any]]:
    """A delegate of a transpose (inserted), conv a and conv b, then a portable kernel: (trace map, graph)."""
    trace = {"instructions": [
        {"id": 0, "kind": "delegate", "delegate": 0, "backend": "XnnpackBackend", "handles": [1, 2], "ops": [
            {"type": "XNNStaticTranspose", "handle": 65535, "inputs": [0], "output": 1},
            {"type": "XNNConv2d", "handle": 1, "inputs": [1], "output": 2},
            {"type": "XNNConv2d", "handle": 2, "inputs": [2], "output": 3},
            {"type": "XNNStaticTranspose", "handle": 65535, "inputs": [3], "output": 4}]},
        {"id": 1, "kind": "kernel", "op": "aten::sort.values", "handles": [3]}]}
    return trace, {"ops": [_graph_op("a", 1, 0), _graph_op("b", 2, 0), _graph_op("s", 3, None, "sort")]}


def _run(scale: int = 1, b_us: int = 3, call_us: int = 12) -> list[dict[str, Any]]:
    """One traced run's events (us, times `scale`): XNNPACK's ops in whole microseconds, the rest in nanoseconds."""
    def ev(name: str | None, instruction: int, op: str | None, us: int) -> dict[str, Any]:
        return {"name": name, "instruction": instruction, "delegate_op": op, "ns": us * 1000 * scale}
    return [ev(None, 0, "Transpose (ND, X32) #1", 1), ev(None, 0, "Convolution (NHWC) #1", 5),
            ev(None, 0, "Convolution (NHWC) #2", b_us), ev(None, 0, "Transpose (ND, X32) #2", 2),
            ev("DELEGATE_CALL", 0, None, call_us), ev("native_call_sort.out", 1, None, 19),
            ev("OPERATOR_CALL", 1, None, 20), ev("Method::execute", 0, None, call_us + 21)]


def test_the_join_gives_inserted_ops_to_their_producer_and_keeps_unowned_time_apart() -> None:
    """Two equal runs. The delegate call (12 us) is 1 us more than its four whole-us readings: that microsecond is
    the readings' truncation (a quarter each, under the half a microsecond an op may take); none is left over."""
    trace, graph = _join_case()
    document = host_layers([_run(), _run()], trace, graph, untraced_median_ms=0.040, tool="ExecuTorch test",
                           calls_ns=[40_000, 40_000])
    by_key = {e["key"]: e for e in document["layers"]}
    # the first transpose reads the graph input: it goes to its consumer a; the last one to its producer b
    assert by_key["a"]["time_ms"] == pytest.approx(0.0065) and by_key["a"]["overhead_cost"] == pytest.approx(0.00125)
    assert by_key["b"]["time_ms"] == pytest.approx(0.0055) and by_key["b"]["overhead_cost"] == pytest.approx(0.00225)
    assert by_key["s"]["time_ms"] == pytest.approx(0.020) and by_key["s"]["placement"] == "CPU (portable)"
    assert by_key[DELEGATE_OVERHEAD]["time_ms"] == pytest.approx(0.0) and by_key[DELEGATE_OVERHEAD]["unowned"]
    assert by_key[RUNTIME_FRAMING]["time_ms"] == pytest.approx(0.001)
    assert by_key[OUTSIDE_EXECUTE]["time_ms"] == pytest.approx(0.007) and by_key[OUTSIDE_EXECUTE]["unowned"]
    assert {k: e["estimator"] for k, e in by_key.items()} == {
        "a": "mean+trunc", "b": "mean+trunc", "s": "mean", DELEGATE_OVERHEAD: "remainder", RUNTIME_FRAMING: "mean",
        OUTSIDE_EXECUTE: "call-execute"}
    assert set(document["cost"]["estimators"]) == {"mean+trunc", "mean", "remainder", "call-execute"}
    assert document["cost"]["total"] == pytest.approx(0.040) and document["cost"]["execute_median"] == pytest.approx(0.033)
    ratios = document["ratios"]
    assert ratios["rows_vs_traced_execute"] == pytest.approx(1.0) and ratios["rows_vs_untraced_median"] == pytest.approx(1.0)
    assert ratios["layers_vs_untraced_median"] == pytest.approx(32 / 40)
    assert [e["key"] for e in document["layers"]][:3] == ["s", OUTSIDE_EXECUTE, "a"]


def test_sub_microsecond_ops_get_their_share_and_preempted_runs_are_left_out() -> None:
    """Conv b takes 0.4 us: it reads 1 us in two runs of five, 0 in the rest; the whole-us mean over the typical runs
    (the half of the calls closest to the median) resolves it where a median reads 0; a preempted run (ten times
    slower) and one far faster are outside that half. Without timed calls, no outside-execute row (an older script)."""
    trace, graph = _join_case()
    runs = [_run(b_us=1), _run(b_us=0), _run(b_us=1), _run(b_us=0), _run(b_us=0), _run(scale=10),
            [dict(e, ns=e["ns"] // 2) for e in _run()]]
    document = host_layers(runs, trace, graph, untraced_median_ms=0.033, tool="ExecuTorch test")
    by_key = {e["key"]: e for e in document["layers"]}
    assert document["cost"]["typical_runs"] == 4 and document["traced_runs"] == 7
    # the typical runs: four of the five normal ones (ties: the earliest). Each op has its half microsecond (the call
    # leaves 3 or 4 us of the readings); b's layer is its reading, the last transpose's 2 us, and the two halves
    assert by_key["b"]["time_ms"] == pytest.approx(((1 + 0 + 1 + 0) / 4 + 2 + 2 * 0.5) / 1000)
    assert by_key[DELEGATE_OVERHEAD]["time_ms"] == pytest.approx((3 + 4 + 3 + 4) / 4 / 1000 - 0.002)
    assert OUTSIDE_EXECUTE not in by_key and document["ratios"]["rows_vs_untraced_median"] is None
    assert "timed no calls" in document["cost"]["source"]
    assert sum(e["time_ms"] for e in document["layers"]) == pytest.approx(document["cost"]["row_sum"])


def test_the_estimate_and_the_typical_runs() -> None:
    """The pure arithmetic: the band is the half of the runs closest to the median; a row's time is its mean there."""
    assert typical([10.0, 11.0, 12.0, 14.0, 100.0, 1.0]) == [0, 1, 2]
    assert typical([5.0, 500.0]) == [0, 1]
    assert estimate([0.0, 0.001, 0.0, 0.001, 0.5], [0, 1, 2, 3], True) == (pytest.approx(0.0005), "mean+trunc")
    assert estimate([0.002, 0.004], [0, 1], False) == (pytest.approx(0.003), "mean")


def test_no_traced_runs_is_said_not_faked(tmp_path: Path) -> None:
    from np_optimizer.profiler.methods.on_device import _no_layer_costs

    assert _no_layer_costs({"artifacts": {"layers": "layers.json"}}) is None
    assert "num_layer_executions" in str(_no_layer_costs({"artifacts": {}, "extras": {}}))
