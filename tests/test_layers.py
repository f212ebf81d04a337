"""Per-layer profiles keyed by module path (np report --layers, np compare), on a model with the pathologies users
meet: 1x1 convolutions on large activations, a pad, and an op that neither the Ethos-U nor XNNPACK delegates (sort)."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_unchanged, make_project, run_np_subprocess, tree_digest

from np_optimizer.layers.coverage import PARTIAL_MARK
from np_optimizer.layers.keys import LayerKey, assign_keys, module_of
from np_optimizer.layers.views import compare_totals

MODEL = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Conv2d(8, 32, 1)
        self.act = nn.ReLU()
        self.project = nn.Conv2d(32, 8, 1)

    def forward(self, x):
        return self.project(self.act(self.expand(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.pad = nn.ZeroPad2d(1)
        self.block = Block()
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        y = self.block(self.pad(self.stem(x)))
        y = self.head(y.mean(dim=(2, 3)))
        return torch.sort(y, dim=1).values  # neither the Ethos-U nor XNNPACK runs sort


def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 3, 24, 24),)
'''
RUN_YAML = 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile:\n- GRAPH_QUANTIZE\n'


@pytest.fixture(scope="module")
def npu_layers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The model on alif_e8 (Ethos-U85), GQ W8-A8, GRAPH_QUANTIZE profiled with mlia; run once, tests only read it."""
    from np_optimizer import api

    base = tmp_path_factory.mktemp("layers")
    (base / "net.py").write_text(MODEL)
    root = base / "ws"
    api.workspace_init(root)
    exp = make_project(root, "net_npu", model=f"{base / 'net.py'}:build", device="alif_e8", steps="gq",
                       run_yaml=RUN_YAML)
    result = run_np_subprocess("run", cwd=exp)
    assert result.exit_code == 0, result.stderr
    before = tree_digest(root)
    yield exp
    assert_unchanged(root, before)


def _result(exp: Path, checkpoint: str = "GRAPH_QUANTIZE") -> dict[str, Any]:
    report = json.loads((exp / "report.json").read_text())
    return next(r for r in report["profile"]["results"] if r["checkpoint"] == checkpoint)


def _layers(exp: Path) -> dict[str, Any]:
    return json.loads((exp / _result(exp)["artifacts"]["layers"]).read_text())


def _model_modules(exp: Path) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("net_under_test", exp.parents[2] / "net.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, _ = module.build()
    return {name: type(m).__name__ for name, m in model.named_modules()}


def test_per_layer_cycles_sum_exactly_to_mlias_total(npu_layers: Path) -> None:
    result = _result(npu_layers)
    total = next(m for m in result["metrics"] if m["metric_type"] == "TOTAL_CYCLES")["value"]
    layers = _layers(npu_layers)
    rows = [r["cycles"] for r in layers["rows"] if r["cycles"] is not None]
    assert sum(rows) == int(total) and layers["cost"]["total"] == total and layers["cost"]["row_sum"] == int(total)
    assert sum(layer["cost"] or 0 for layer in layers["layers"]) == int(total)
    # the rows are Vela's own: its per-layer CSV, as MLIA wrote it beside the estimate
    vela_csv = next((npu_layers / result["artifacts"]["layers"]).parent.rglob("*_per-layer.csv"))
    with open(vela_csv, newline="") as handle:
        assert [int(r["Op Cycles"]) for r in csv.DictReader(handle)] == rows
    assert abs(sum(layer["share_pct"] or 0 for layer in layers["layers"]) - 100.0) < 0.01
    # one MAC convention per column (Vela's nn_macs on an Ethos-U), np's graph count kept beside it
    macs = next(m for m in result["metrics"] if m["metric_type"] == "MACS")["value"]
    assert layers["macs"]["vela_nn_macs"] == macs and 0 < layers["macs"]["np_graph_macs"] != macs


def test_layers_are_keyed_by_the_models_module_paths(npu_layers: Path) -> None:
    modules = _model_modules(npu_layers)
    layers = _layers(npu_layers)
    for layer in layers["layers"]:
        assert layer["module"] in modules, layer["key"]
        assert layer["class"] == modules[layer["module"]] or layer["module"] == "", layer
    by_key = {layer["key"]: layer for layer in layers["layers"]}
    assert {"stem", "pad", "block.expand", "block.project", "head", "(model).mean"} <= set(by_key)
    assert layers["layers"][0]["key"] == "block.expand"  # the 1x1 expansion on the padded activation costs most
    assert by_key["pad"]["overhead_cost"] == by_key["pad"]["cost"] > 0  # a pad only moves data
    assert by_key["block.expand"]["raw_ids"] and all(r["raw_id"] for r in layers["rows"])  # TOSA ids kept
    assert by_key["block.expand"]["placement"] == "NPU" and by_key["block.expand"]["macs"] > 0


def test_cpu_fallback_layer_and_partial_totals_are_marked(npu_layers: Path, run_np) -> None:
    layers = _layers(npu_layers)
    sort = next(layer for layer in layers["layers"] if layer["key"] == "(model).sort")
    assert sort["placement"] == "CPU" and sort["cost"] is None  # not estimated, never a fake 0
    coverage = layers["coverage"]
    assert coverage["partial"] and 0 < coverage["npu_op_share_pct"] < 100
    assert [e["key"] for e in coverage["left_out"]] == ["(model).sort"]
    doc = run_np("report", "--json", cwd=npu_layers).json
    step = doc["pipeline"]["steps"][0]
    marked = {m["metric_type"] for m in step["metrics"] if m.get("coverage")}
    assert {"LATENCY", "MEMORY", "MACS"} <= marked
    assert any("(model).sort" in w for w in step["profile"]["warnings"])
    table = run_np("report", cwd=npu_layers)
    assert table.exit_code == 0
    row = next(line for line in table.stdout.splitlines() if "graph_quan" in line)
    # every partial total in the table carries the mark: latency, memory, MACs and weights of the NPU part
    assert row.count(PARTIAL_MARK.split()[0].lstrip("(")) >= 3, table.stdout
    assert "(model).sort" in table.stdout + table.stderr
    plain = run_np("report", "--plain", cwd=npu_layers).stdout.splitlines()
    start = plain.index("section:pipeline")
    header, values = plain[start + 1].split("\t"), plain[start + 3].split("\t")
    assert "LATENCY" in values[header.index("partial_totals")]


def test_report_layers_and_compare_read_stored_files_without_torch(npu_layers: Path) -> None:
    code = ("import json, sys, time; from np_optimizer.cli.main import main; t = time.perf_counter(); "
            "a = main(['report', '--layers', '--json']); b = main(['compare', 'INPUT_MODEL', 'GRAPH_QUANTIZE', "
            "'--json']); print(json.dumps({'codes': [a, b], 'torch': 'torch' in sys.modules, "
            "'seconds': time.perf_counter() - t}), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=npu_layers, capture_output=True, text=True, timeout=120)
    facts = json.loads(done.stderr.strip().splitlines()[-1])
    assert facts["codes"] == [0, 0] and not facts["torch"], done.stderr
    decoder = json.JSONDecoder()
    layers, end = decoder.raw_decode(done.stdout)
    compare = decoder.raw_decode(done.stdout[end:].lstrip())[0]
    assert layers["checkpoint"] == "GRAPH_QUANTIZE" and layers["cost"]["unit"] == "cycles"
    assert layers["layers"][0]["key"] == "block.expand"
    assert [c["label"] for c in compare["columns"]] == ["INPUT_MODEL", "GRAPH_QUANTIZE"]
    moved = {p["key"]: (p["before"], p["after"]) for p in compare["diffs"][0]["placement_changes"]}
    assert moved["block.expand"] == ("CPU", "delegated") and "(model).sort" not in moved  # sort stays on the CPU
    latency = next(t for t in compare["totals"] if t["metric"] == "LATENCY")
    assert latency["cells"][1]["coverage"].startswith("partial")


def test_unestimated_checkpoint_shows_its_compiled_layers_on_the_cpu(npu_layers: Path, run_np) -> None:
    """INPUT_MODEL is float, which the Ethos-U cannot run: its layers are listed from the compile, all on the CPU,
    ranked by MACs (a static count), never with a cost np did not get."""
    doc = run_np("report", "--layers", "INPUT_MODEL", "--json", cwd=npu_layers).json
    assert doc["cost"]["unit"] == "MACs" and doc["result_kind"] == "static"
    assert {layer["placement"] for layer in doc["layers"]} == {"CPU"}
    assert doc["layers"][0]["module"] in ("block.expand", "block.project")
    assert set(_model_modules(npu_layers)) >= {layer["module"] for layer in doc["layers"]}


def test_report_layers_bad_input_is_a_clear_error(npu_layers: Path, cpu_experiment: Path, run_np) -> None:
    result = run_np("report", "--layers", "NOPE", cwd=npu_layers)
    assert result.exit_code == 2 and "NP-RPT-400" in result.stderr + result.stdout
    assert run_np("report", "--layers", "--top", "0", cwd=npu_layers).exit_code == 2
    missing = run_np("report", "--layers", "--json", cwd=cpu_experiment)  # nothing run or compiled yet
    assert missing.exit_code == 3 and missing.json["code"] == "NP-RPT-404"


# ---------------------------------------------------------------------------------------------- pure logic


def test_overhead_without_module_goes_to_the_producing_layer() -> None:
    conv = {"a": ("conv", "torch.nn.modules.conv.Conv2d")}
    keys = assign_keys([
        ("q_in", "quantized_decomposed.quantize_per_tensor.default", {}, [], None),
        ("conv", "aten.convolution.default", conv, ["q_in"], ("conv2d_1", "builtin.conv2d")),
        ("perm", "aten.permute_copy.default", {"": ("", "m.Net")}, ["conv"], None),
        ("mean", "aten.sum.dim_IntList", {"": ("", "m.Net")}, ["perm"], ("mean_1", "method_descriptor.mean")),
    ], root_class="Net")
    assert keys["conv"] == LayerKey("conv", "Conv2d", "conv2d")
    assert keys["q_in"] == keys["conv"] == keys["perm"]  # the input's quantize: the first layer; a permute: its producer
    assert keys["mean"] == LayerKey("", "Net", "mean") and keys["mean"].label == "(model).mean"
    assert module_of({"x": ["block.expand", "torch.nn.modules.conv.Conv2d"]}) == ("block.expand", "Conv2d")


def test_a_delta_inside_the_measured_spread_is_not_significant() -> None:
    columns = [{"totals": {"LATENCY": {"value": 10.0, "unit": "ms", "spread": 0.5}}},
               {"totals": {"LATENCY": {"value": 10.3, "unit": "ms", "spread": 0.4}}},
               {"totals": {"LATENCY": {"value": 12.0, "unit": "ms", "spread": 0.4}}},
               {"totals": {"LATENCY": {"value": 9.99, "unit": "ms"}}}]
    cells = compare_totals(columns)[0]["cells"]
    assert [c.get("significant") for c in cells] == [None, False, True, False]
    assert cells[2]["better"] is False and abs(cells[2]["delta_pct"] - 20.0) < 1e-9


def test_a_quantize_that_leaves_most_weights_float_warns_naming_the_layers() -> None:
    """XNNPACK's W8-A8 quantizer annotates no LSTM: the LSTM's weights stay float, and the step must say so."""
    import torch
    from torch import nn

    from np_optimizer.layers.weights import float_weights, float_weights_warning
    from np_optimizer.quantize.pt2e import quantize_program

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 64, batch_first=True)
            self.head = nn.Linear(64, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.lstm(x)[0][:, -1])

    torch.manual_seed(0)
    example = (torch.randn(1, 8, 16),)
    program = quantize_program(torch.export.export(Tagger().eval(), example), backend="xnnpack", scheme="W8-A8",
                               target=None, calibration=[example], keep_float=frozenset())
    summary = float_weights(program)
    assert [e["module"] for e in summary["float_layers"]] == ["lstm"]  # head's weight went through int8
    assert summary["float_share_pct"] > 90
    warning = float_weights_warning(summary, "W8-A8", "xnnpack")
    assert warning is not None and "lstm (LSTM" in warning and "did not annotate" in warning
