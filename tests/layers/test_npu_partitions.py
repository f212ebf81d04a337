"""Ethos-U rows when the model splits into several NPU partitions: a keyword-spotting CNN whose average pool over the
feature map stays on the CPU, so the convolutions and the classifier lower to two NPU partitions. Each
partition's Vela rows must be keyed with that partition's own Arm debug information, and no row may carry more MACs
than its module computes (before, every row of the first partition went to `classifier`)."""

from __future__ import annotations

import html
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.layers.ethos_u import _unkey_impossible_macs
from tests.helpers import make_project, run_here

MODEL = '''
import torch
from torch import nn


class Separable(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, c, 1)

    def forward(self, x):
        return torch.relu(self.pw(torch.relu(self.dw(x))))


class Kws(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, (10, 4), stride=2, padding=(5, 1))
        self.blocks = nn.Sequential(Separable(32), Separable(32))
        # on the 25x5 map, a kernel that does not tile it: the Arm lowering pads, and the U55 refuses the padded pool
        self.pool = nn.AvgPool2d((24, 5))
        self.classifier = nn.Linear(32, 12)

    def forward(self, x):
        y = self.pool(self.blocks(torch.relu(self.conv(x))))
        return self.classifier(torch.flatten(y, 1))


def build():
    torch.manual_seed(0)
    return Kws().eval(), (torch.randn(1, 1, 49, 10),)
'''
RUN_YAML = 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile:\n- GRAPH_QUANTIZE\n'
GO_RUN_YAML = RUN_YAML.replace("steps:\n", "steps:\n- graph_optimize: null\n")


def _module_macs(model_file: Path) -> dict[str, int]:
    """Each Conv2d's and Linear's own MACs, counted by hand from its output shape (forward hooks)."""
    import torch

    spec = importlib.util.spec_from_file_location("kws_under_test", model_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, example = module.build()
    macs: dict[str, int] = {}

    def hook(name: str) -> Any:
        def count(layer: Any, _inputs: Any, output: Any) -> None:
            if isinstance(layer, torch.nn.Conv2d):
                kh, kw = layer.kernel_size
                macs[name] = output.numel() * (layer.in_channels // layer.groups) * kh * kw
            else:
                macs[name] = layer.in_features * layer.out_features
        return count

    for name, layer in model.named_modules():
        if isinstance(layer, (torch.nn.Conv2d, torch.nn.Linear)):
            layer.register_forward_hook(hook(name))
    model(*example)
    return macs


@pytest.fixture(scope="module")
def kws(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, int], list[str], Path]:
    """The model on corstone_300 (Ethos-U55), GQ W8-A8, GRAPH_QUANTIZE estimated by MLIA: (layers.json, MACs per
    module, the round's warnings, the experiment)."""
    from np_optimizer import api

    base = tmp_path_factory.mktemp("kws")
    (base / "kws.py").write_text(MODEL)
    api.workspace_init(base / "ws")
    exp = make_project(base / "ws", "kws", model=f"{base / 'kws.py'}:build", device="corstone_300", steps="gq",
                       run_yaml=RUN_YAML)
    run_here(exp)
    report = json.loads((exp / "report.json").read_text())
    round_ = next(r for r in report["profile"]["results"] if r["checkpoint"] == "GRAPH_QUANTIZE")
    layers = json.loads((exp / round_["artifacts"]["layers"]).read_text())
    return layers, _module_macs(base / "kws.py"), list(round_.get("warnings") or []), exp


_Kws = tuple[dict[str, Any], dict[str, int], list[str], Path]
POOL_REASON = "Avgpool2d with padding needs kernel dims < 8, got [24, 5]"  # the Arm support check's own words


@pytest.mark.np_run
def test_each_partition_is_keyed_with_its_own_debug_information(kws: _Kws) -> None:
    layers, macs, warnings, _exp = kws
    npu_rows = [r for r in layers["rows"] if r.get("placement") == "NPU"]
    assert {r["partition"] for r in npu_rows} == {0, 1}  # two NPU partitions, the pool between them on the CPU
    assert not any("last NPU partition" in w or "own for" in w for w in warnings), warnings
    by_key = {e["key"]: e for e in layers["layers"]}
    # every convolution and the classifier has its row, on the NPU, with its own MACs
    for name, own in macs.items():
        assert by_key[name]["placement"] == "NPU" and by_key[name]["macs"] == own, (name, by_key.get(name))
    assert by_key["pool"]["placement"] == "CPU"
    for row in npu_rows:  # and no row carries more MACs than its module computes
        if row.get("module"):
            assert int(row.get("macs") or 0) <= macs.get(row["module"], 0), row


@pytest.mark.np_run
def test_the_layer_left_on_the_cpu_says_why_and_what_to_do(kws: _Kws, run_np: Any, tmp_path: Path) -> None:
    """The pool's reason, in the Arm partitioner's words, at its module path: in the compile's layers_graph.json
    (only for ops of work: no placeholder, parameter or boundary quantize/dequantize), in np report --layers (--json
    and the table's placement cell), and in the one summary line of np run's log and np report."""
    _layers, _macs, _warnings, exp = kws
    graph = json.loads(next(exp.glob("01_graph_quantize/artifacts/compiled_*/layers_graph.json")).read_text())
    with_reason = [op for op in graph["ops"] if op.get("reason")]
    assert [(op["key"], op["op"], op["reason"]) for op in with_reason] == [("pool", "aten.avg_pool2d", POOL_REASON)]
    assert any("quantize_per_tensor" in op["op"] and not op["delegated"] for op in graph["ops"])  # left, no reason
    doc = run_np("report", "--layers", "--json", cwd=exp).json
    by_key = {e["key"]: e for e in doc["layers"]}
    assert by_key["pool"]["placement"] == "CPU" and by_key["pool"]["reason"] == POOL_REASON
    assert all("reason" not in e for e in doc["layers"] if e["placement"] == "NPU")
    summary = f"1 op left the NPU (none of the MACs np counts, not estimated); costliest: pool (AvgPool2d): {POOL_REASON}."
    assert doc["left"].startswith(summary) and "To do: " in doc["left"], doc["left"]
    assert "graph_optimize's rewrite avg_pool_as_mean does this" in doc["left"]  # the run has no graph_optimize
    table = run_np("report", "--layers", cwd=exp)
    assert "CPU: Avgpool2d with padding" in table.stdout, table.stdout  # the placement cell (wrapped in the table)
    log = (exp / "logs" / "execution.log").read_text()
    assert sum(summary in line for line in log.splitlines()) == 1, log
    assert f"graph_quantize: {summary}" in " ".join(run_np("report", cwd=exp).stdout.split())
    assert run_np("report", "--html", str(tmp_path / "report.html"), cwd=exp).exit_code == 0
    page = html.unescape((tmp_path / "report.html").read_text())  # the HTML per-layer section says the same
    assert f"CPU: {POOL_REASON}" in page and summary in page


@pytest.mark.np_run
def test_graph_optimize_brings_the_pool_back_to_the_npu(tmp_path: Path) -> None:
    """The same model with graph_optimize in the run: its rewrite avg_pool_as_mean says in job.json that it changed
    `pool`, GO's SNR against INPUT_MODEL is above 100 dB, and the GRAPH_QUANTIZE estimate is whole (no CPU row, no
    reason, no summary line)."""
    from np_optimizer import api

    (tmp_path / "kws.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "kws_go", model=f"{tmp_path / 'kws.py'}:build", device="corstone_300",
                       steps="go,gq", run_yaml=GO_RUN_YAML)
    run_here(exp)
    go = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    rewrite = [p for p in go["changes"]["passes"] if p["pass"] == "avg_pool_as_mean"]
    assert [(p["outcome"], p["layers"]) for p in rewrite] == [("applied", ["pool"])], rewrite
    assert go["fidelity"]["program"]["snr_db"] > 100
    report = json.loads((exp / "report.json").read_text())
    round_ = next(r for r in report["profile"]["results"] if r["checkpoint"] == "GRAPH_QUANTIZE")
    layers = json.loads((exp / round_["artifacts"]["layers"]).read_text())
    assert layers["rows"] and all(r.get("placement") == "NPU" for r in layers["rows"]), layers["rows"]
    assert {e["key"]: e["placement"] for e in layers["layers"]}["pool"] == "NPU"
    log = (exp / "logs" / "execution.log").read_text()
    assert "left the NPU" not in log and "avg_pool_as_mean: " in log and "(pool)" in log


def test_a_row_whose_macs_its_layer_cannot_compute_keeps_its_tosa_name() -> None:
    graph = {"ops": [{"key": "classifier", "macs": 768}, {"key": "conv", "macs": 320_000}]}
    rows = [{"key": "classifier", "module": "classifier", "class": "Linear", "raw_id": "tosa_rescale_default",
             "op_family": "conv2d", "macs": 320_000},
            {"key": "classifier", "module": "classifier", "class": "Linear", "raw_id": "tosa_reshape_default_1",
             "op_family": "fully_connected", "macs": 768},
            {"key": "conv", "module": "conv", "class": "Conv2d", "raw_id": "tosa_rescale_default_2", "macs": 320_000}]
    notes = _unkey_impossible_macs(rows, graph)
    assert [r["key"] for r in rows] == ["tosa_rescale_default", "classifier", "conv"]  # the FC row stays
    assert rows[0]["module"] is None and rows[0]["class"] is None and len(notes) == 1
    assert "320,000 MACs, more than classifier computes (768)" in notes[0]
