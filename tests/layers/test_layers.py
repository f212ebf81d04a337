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

from np_optimizer.layers.coverage import PARTIAL_MARK
from np_optimizer.layers.keys import LayerKey, assign_keys, module_of
from np_optimizer.layers.views import compare_totals
from tests.helpers import assert_unchanged, make_project, run_here, tree_digest

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
        self.bn = nn.BatchNorm2d(8)  # folded into stem by graph_optimize (and by PT2E): its key must follow it
        self.pad = nn.ZeroPad2d(1)
        self.block = Block()
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        y = self.block(self.pad(self.bn(self.stem(x))))
        y = self.head(y.mean(dim=(2, 3)))
        return torch.sort(y, dim=1).values  # neither the Ethos-U nor XNNPACK runs sort


def build():
    torch.manual_seed(0)
    net = Net().eval()
    net.bn.running_mean.uniform_(-0.5, 0.5)  # a BN that is far from the identity
    net.bn.running_var.uniform_(0.25, 4.0)
    return net, (torch.randn(1, 3, 24, 24),)
'''
RUN_YAML = ('version: "1.0"\nsteps:\n- graph_optimize: null\n- graph_quantize:\n  - scheme: W8-A8\n'
            'profile:\n- GRAPH_QUANTIZE\n')


@pytest.fixture(scope="module")
def npu_layers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The model on alif_e8 (Ethos-U85), GO then GQ W8-A8, GRAPH_QUANTIZE profiled with mlia; run once, tests only
    read it."""
    from np_optimizer import api

    base = tmp_path_factory.mktemp("layers")
    (base / "net.py").write_text(MODEL)
    root = base / "ws"
    api.workspace_init(root)
    exp = make_project(root, "net_npu", model=f"{base / 'net.py'}:build", device="alif_e8", steps="go,gq",
                       run_yaml=RUN_YAML)
    run_here(exp)
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


@pytest.mark.np_run
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


@pytest.mark.np_run
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


@pytest.mark.np_run
def test_cpu_fallback_layer_and_partial_totals_are_marked(npu_layers: Path, run_np) -> None:
    layers = _layers(npu_layers)
    sort = next(layer for layer in layers["layers"] if layer["key"] == "(model).sort")
    assert sort["placement"] == "CPU" and sort["cost"] is None  # not estimated, never a fake 0
    coverage = layers["coverage"]
    assert coverage["partial"] and 0 < coverage["npu_op_share_pct"] < 100
    assert [e["key"] for e in coverage["left_out"]] == ["(model).sort"]
    doc = run_np("report", "--json", cwd=npu_layers).json
    step = next(s for s in doc["pipeline"]["steps"] if s["checkpoint"] == "GRAPH_QUANTIZE")
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
    header = plain[start + 1].split("\t")
    values = next(line for line in plain[start + 2:] if "graph_quantize" in line).split("\t")
    assert "LATENCY" in values[header.index("partial_totals")]


@pytest.mark.np_run
def test_a_sweep_trial_of_a_partial_estimate_says_what_left_the_npu_and_what_to_do(npu_layers: Path) -> None:
    """What a sweep's trial reports of this experiment (its last checkpoint, GRAPH_QUANTIZE): the latency covers the
    NPU part only, and one caveat names the op left on the CPU, the Arm partitioner's reason and reasons.py's advice;
    the front marks the trial with it (tests/report/test_front.py)."""
    from np_optimizer.layers.reasons import advice
    from np_optimizer.records.front import LEFT_CAVEAT, PARTIAL_CAVEAT
    from np_optimizer.sweep.values import trial_values
    from np_optimizer.workspace import Experiment

    got = trial_values(Experiment(npu_layers), ["LATENCY", "SNR"])
    assert got.checkpoint == "GRAPH_QUANTIZE"
    assert any(c.startswith(f"latency {PARTIAL_CAVEAT}") for c in got.caveats), got.caveats
    assert not any(c.startswith("snr") for c in got.caveats)
    left = next(c for c in got.caveats if c.startswith(LEFT_CAVEAT))
    reason = "Not included in BaseTOSASupportList or a registered tosa_support_check"
    assert "1 op left the NPU" in left and f"(model).sort (aten.sort): {reason}" in left, left
    assert left.endswith(f"To do: {advice(reason, 'the NPU')}."), left


@pytest.mark.np_run
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
    # every row off the NPU says why, in the Arm partitioner's words (np report --layers --json's `reason`)
    off = {e["key"]: e.get("reason") for e in layers["layers"] if e["placement"] != "NPU"}
    assert off == {"(model).sort": "Not included in BaseTOSASupportList or a registered tosa_support_check"}, off
    assert [c["label"] for c in compare["columns"]] == ["INPUT_MODEL", "GRAPH_QUANTIZE"]
    moved = {p["key"]: (p["before"], p["after"]) for p in compare["diffs"][0]["placement_changes"]}
    assert moved["block.expand"] == ("CPU", "delegated") and "(model).sort" not in moved  # sort stays on the CPU
    latency = next(t for t in compare["totals"] if t["metric"] == "LATENCY")
    assert latency["cells"][1]["coverage"].startswith("partial")


@pytest.mark.np_run
def test_unestimated_checkpoint_shows_its_compiled_layers_on_the_cpu(npu_layers: Path, run_np) -> None:
    """INPUT_MODEL is float, which the Ethos-U cannot run: its layers are listed from the compile, all on the CPU,
    ranked by MACs (a static count), never with a cost np did not get."""
    doc = run_np("report", "--layers", "INPUT_MODEL", "--json", cwd=npu_layers).json
    assert doc["cost"]["unit"] == "MACs" and doc["result_kind"] == "static"
    assert {layer["placement"] for layer in doc["layers"]} == {"CPU"}
    assert doc["layers"][0]["module"] in ("block.expand", "block.project")
    assert set(_model_modules(npu_layers)) >= {layer["module"] for layer in doc["layers"]}


@pytest.mark.np_run
def test_report_layers_bad_input_is_a_clear_error(npu_layers: Path, cpu_experiment: Path, run_np) -> None:
    result = run_np("report", "--layers", "NOPE", cwd=npu_layers)
    assert result.exit_code == 2 and "NP-RPT-400" in result.stderr + result.stdout
    assert run_np("report", "--layers", "--top", "0", cwd=npu_layers).exit_code == 2
    missing = run_np("report", "--layers", "--json", cwd=cpu_experiment)  # nothing run or compiled yet
    assert missing.exit_code == 3 and missing.json["code"] == "NP-RPT-404"


def _job(exp: Path, name: str) -> dict[str, Any]:
    return json.loads((exp / name / "job.json").read_text())


def _numerics(exp: Path, job: str) -> dict[str, Any]:
    return json.loads((exp / job / "artifacts" / "layers_snr.json").read_text())


@pytest.mark.np_run
def test_a_fused_bn_maps_to_its_conv_and_per_layer_snr_follows_it(npu_layers: Path) -> None:
    """GO folds bn into stem: its job.json records bn -> stem, and each step's per-layer SNR compares stem with
    INPUT_MODEL's bn output (the fused layer's output is the BN's), layer by layer."""
    assert _job(npu_layers, "01_graph_optimize")["changes"]["module_map"] == {"bn": "stem"}
    gq = _job(npu_layers, "02_graph_quantize")
    assert gq["changes"]["module_map"] == {}  # nothing left for PT2E to fold
    go_rows = {r["key"]: r for r in _numerics(npu_layers, "01_graph_optimize")["layers"]}
    assert go_rows["stem"]["reference_key"] == "bn" and go_rows["stem"]["fused"] == ["bn"]
    assert all(r["identical"] or r["snr_db"] > 100 for r in go_rows.values()), go_rows  # float rounding only
    numerics = _numerics(npu_layers, "02_graph_quantize")
    assert numerics["module_map_from_input"] == {"bn": "stem"} and numerics["inputs"] == gq["fidelity"]["inputs"]
    rows = {r["key"]: r for r in numerics["layers"]}
    modules = _model_modules(npu_layers)
    assert {r["module"] for r in rows.values()} <= set(modules)
    assert {"stem", "pad", "block.expand", "block.project", "head", "(model).sort"} <= set(rows)
    assert all(r["snr_db"] is not None and 10 < r["snr_db"] < 90 for r in rows.values()), rows  # int8: tens of dB
    # the last layer's output is the model's output: its SNR is the step's own SNR against INPUT_MODEL
    assert abs(rows["(model).sort"]["snr_db"] - gq["fidelity"]["program"]["snr_db"]) < 0.01
    # report.json keeps a reference and a summary, never the per-layer rows
    report = json.loads((npu_layers / "report.json").read_text())
    entry = next(s for s in report["pipeline"]["steps"] if s["job"] == "02_graph_quantize")["fidelity"]["layers"]
    assert entry["file"] == "02_graph_quantize/artifacts/layers_snr.json" and entry["layers"] == len(rows)
    assert [low["key"] for low in entry["lowest"]] == [r["key"] for r in sorted(rows.values(),
                                                                                key=lambda r: r["snr_db"])][:3]


@pytest.mark.np_run
def test_report_layers_shows_each_layers_snr(npu_layers: Path, run_np) -> None:
    rows = {r["key"]: r["snr_db"] for r in _numerics(npu_layers, "02_graph_quantize")["layers"]}
    doc = run_np("report", "--layers", "--json", cwd=npu_layers).json
    assert doc["snr"]["vs"] == "INPUT_MODEL" and doc["snr"]["unit"] == "dB" and doc["snr"]["inputs"] == 8
    shown = {layer["key"]: layer["snr_db"] for layer in doc["layers"]}
    assert shown["block.expand"] == rows["block.expand"] and shown["(model).sort"] == rows["(model).sort"]
    table = run_np("report", "--layers", cwd=npu_layers).stdout
    assert "SNR (dB)" in table and f"{rows['block.expand']:.1f}" in table
    plain = run_np("report", "--layers", "--plain", cwd=npu_layers).stdout.splitlines()
    header = plain[plain.index("section:layers:GRAPH_QUANTIZE") + 1].split("\t")
    expand = next(line.split("\t") for line in plain if line.startswith("block.expand\t"))
    assert float(expand[header.index("snr_db")]) == rows["block.expand"]
    reference = run_np("report", "--layers", "INPUT_MODEL", "--json", cwd=npu_layers).json
    assert reference["snr"]["reference"] is True and all("snr_db" not in layer for layer in reference["layers"])


@pytest.mark.np_run
def test_compare_lists_the_layers_whose_snr_dropped_most(npu_layers: Path, run_np) -> None:
    doc = run_np("compare", "INPUT_MODEL", "GRAPH_QUANTIZE", "--json", cwd=npu_layers).json
    diff = doc["diffs"][0]
    assert diff["matched"] == {"bn": "stem"}
    drops = diff["snr_drops"]
    assert len(drops) >= 5 and all(d["before_identical"] and d["before"] is None for d in drops)
    assert [d["after"] for d in drops] == sorted(d["after"] for d in drops)  # from identical: the lowest SNR first
    assert "bn" not in {d["key"] for d in drops}
    table = run_np("compare", "INPUT_MODEL", "GRAPH_QUANTIZE", cwd=npu_layers).stdout
    assert "Layers whose SNR dropped most: INPUT_MODEL -> GRAPH_QUANTIZE" in table and drops[0]["key"] in table
    plain = run_np("compare", "INPUT_MODEL", "GRAPH_QUANTIZE", "--plain", cwd=npu_layers).stdout
    assert "section:layer_snr:GRAPH_QUANTIZE" in plain
    # GO changes nothing beyond float rounding: no layer is listed as a loss
    assert "zeroed" not in _job(npu_layers, "02_graph_quantize")["fidelity"]["layers"]  # healthy activations
    go = run_np("compare", "INPUT_MODEL", "GRAPH_OPTIMIZE", "--json", cwd=npu_layers).json
    assert go["diffs"][0]["snr_drops"] == [] and go["diffs"][0]["matched"] == {"bn": "stem"}


TINY_MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, padding=1)
        self.second = nn.Conv2d(8, 8, 3, padding=1)
        self.third = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y = self.third(torch.relu(self.second(torch.relu(self.first(x)))))
        return self.head(y.mean(dim=(2, 3)))


def build():
    torch.manual_seed(0)
    net = Net().eval()
    with torch.no_grad():  # weights 1000x too small, as an untrained init can make them: activations vanish
        for conv in (net.second, net.third):
            conv.weight.mul_(1e-3)
            conv.bias.zero_()
    return net, (torch.randn(1, 3, 16, 16),)
'''


CLS_MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    """A ViT in miniature: a class token much smaller than the projected patches, and a head that reads it alone."""

    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.full((1, 1, 16), 0.01))
        self.proj = nn.Linear(16, 16)
        self.mix = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y = torch.cat([self.cls.expand(x.shape[0], -1, -1), self.proj(x)], dim=1)
        return self.head(self.mix(y)[:, 0])


def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 8, 16),)
'''


def _quantized(tmp_path: Path, run_np, source: str) -> Path:
    """A workspace with one project on raspberry_pi_5 built from `source`, after np run with GQ W8-A8 only."""
    from np_optimizer import api

    (tmp_path / "net.py").write_text(source)
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "net", model=f"{tmp_path / 'net.py'}:build", device="raspberry_pi_5",
                       steps="gq", run_yaml='version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n')
    assert run_np("run", cwd=exp).exit_code == 0
    return exp


@pytest.mark.np_run
def test_a_small_position_that_loses_more_than_the_whole_output_is_named(tmp_path: Path, run_np) -> None:
    """The class token of a sequence output loses far more to int8 than the whole tensor: the step names the
    position and the layer where it starts, and np report --layers shows it beside the layer's SNR."""
    exp = _quantized(tmp_path, run_np, CLS_MODEL)
    job = _job(exp, "01_graph_quantize")
    weak = job["fidelity"]["layers"]["weak_position"]
    assert weak["index"] == 0 and weak["positions"] == 9 and weak["snr_db"] <= weak["layer_snr_db"] - 10
    assert any(w.startswith("Position 0 of 9 in " + weak["first"]) for w in job["warnings"])
    rows = {r["key"]: r for r in _numerics(exp, "01_graph_quantize")["layers"]}
    assert rows[weak["first"]]["weak_position"]["index"] == 0
    assert "(pos 0: " in run_np("report", "--layers", cwd=exp).stdout


@pytest.mark.np_run
def test_activations_that_quantize_to_zero_are_named(tmp_path: Path, run_np) -> None:
    """A model whose activations vanish (below half the int8 step): the GQ job says from which layer on they turn
    into zeros, and layers_snr.json marks those layers, instead of an unexplained 0 dB."""
    exp = _quantized(tmp_path, run_np, TINY_MODEL)
    job = _job(exp, "01_graph_quantize")
    zeroed = job["fidelity"]["layers"]["zeroed"]
    assert zeroed["first"] in ("second", "third") and zeroed["reference_peak"] < zeroed["int8_step"] / 2
    assert any(w.startswith("Quantization turns the activations") and zeroed["first"] in w for w in job["warnings"])
    rows = {r["key"]: r for r in _numerics(exp, "01_graph_quantize")["layers"]}
    assert not rows["first"].get("zeroed") and rows["first"]["snr_db"] > 20  # the first conv is healthy
    assert rows["third"].get("zeroed") and "quantizes to zero" in rows["third"]["note"]
    third = next(line for line in run_np("report", "--layers", cwd=exp).stdout.splitlines() if "third" in line)
    assert "zeroed" in third  # the table says why the SNR is 0 dB
    assert "weak_position" not in job["fidelity"]["layers"]  # 4-D outputs: no positions
    report = run_np("report", cwd=exp)
    assert "01_graph_quantize: Quantization turns the activations" in report.stdout + report.stderr  # step warnings


# ---------------------------------------------------------------------------------------------- pure logic


def test_module_map_follows_fused_layers_and_drops_dead_ones() -> None:
    from np_optimizer.layers.lineage import INPUT, LayerGraph, compose, module_map, translate

    before = LayerGraph(labels=["conv", "bn", "dead", "act", "head"],
                        producers={"conv": {INPUT}, "bn": {"conv"}, "dead": {"conv"}, "act": {"bn"},
                                   "head": {"act", "conv"}},
                        live={"conv", "bn", "act", "head"})
    after = LayerGraph(labels=["conv", "act", "head"])
    assert module_map(before, after) == {"bn": "conv", "dead": None}
    chained = LayerGraph(labels=["conv", "bn", "act"], producers={"conv": {INPUT}, "bn": {"conv"}, "act": {"bn"}},
                         live={"conv", "bn", "act"})
    assert module_map(chained, LayerGraph(labels=["conv"])) == {"bn": "conv", "act": "conv"}
    assert compose({"bn": "conv"}, {"conv": "block"}) == {"bn": "block", "conv": "block"}
    # a checkpoint's keys as another checkpoint's, both reached from INPUT_MODEL
    assert translate(["conv", "act"], {"bn": "conv"}, {"bn": None}) == {"conv": "conv", "act": "act"}


def test_layer_diff_merges_a_fused_layers_cost_into_its_target() -> None:
    from np_optimizer.layers.views import layer_diff

    def column(layers: list[tuple[str, int]], module_map: dict[str, str | None], snr: Any) -> dict[str, Any]:
        return {"layers": {"cost": {"unit": "cycles"}, "layers": [{"key": k, "cost": c} for k, c in layers]},
                "placement": {}, "module_map": module_map, "snr": snr, "snr_reference": snr == {}}

    diff = layer_diff(column([("stem", 100), ("bn", 20), ("head", 5)], {}, {}),
                      column([("stem", 90), ("head", 5)], {"bn": "stem"},
                             {"stem": {"snr_db": 30.0}, "head": {"snr_db": 20.0}, "tail": {"snr_db": 150.0}}))
    assert [(c["key"], c["before"], c["after"], c["merged"]) for c in diff["cost_changes"]] == [
        ("stem", 120, 90, ["bn"]), ("head", 5, 5, [])]
    assert diff["matched"] == {"bn": "stem"}
    # 150 dB is float32 rounding, not a loss; the rest ranked by the noise they gained
    assert [d["key"] for d in diff["snr_drops"]] == ["head", "stem"]


def test_a_measured_layer_change_within_its_spread_is_not_significant() -> None:
    from np_optimizer.layers.views import layer_diff

    def column(layers: list[tuple[str, float, float | None]], unit: str = "ms") -> dict[str, Any]:
        return {"layers": {"cost": {"unit": unit}, "layers": [{"key": k, "cost": c, "spread_ms": s}
                                                              for k, c, s in layers]},
                "placement": {}, "module_map": {}, "snr": None}

    diff = layer_diff(column([("conv", 1.00, 0.05), ("head", 0.20, 0.01)]),
                      column([("conv", 0.60, 0.04), ("head", 0.21, 0.02)]))
    assert {c["key"]: c["significant"] for c in diff["cost_changes"]} == {"conv": True, "head": False}
    # estimates carry no spread: every change counts; a share compared across units with a measured side: unknown
    estimated = layer_diff(column([("conv", 100, None)], "cycles"), column([("conv", 101, None)], "cycles"))
    assert estimated["cost_changes"][0]["significant"] is True
    mixed = layer_diff(column([("conv", 100, None)], "cycles"), column([("conv", 0.5, 0.1)]))
    assert mixed["cost_field"] == "share_pct" and mixed["cost_changes"][0]["significant"] is None


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


def test_an_snr_identical_to_the_input_models_is_shown_without_a_delta() -> None:
    columns = [{"totals": {}}, {"totals": {"SNR": {"value": None, "unit": "dB", "identical": True}}},
               {"totals": {"SNR": {"value": 30.0, "unit": "dB"}}}]
    cells = next(row for row in compare_totals(columns) if row["metric"] == "SNR")["cells"]
    assert cells[0] is None and cells[1]["identical"] and "delta" not in cells[1] and cells[2]["value"] == 30.0


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
