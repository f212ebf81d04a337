"""A recurrent model through the real pipeline on raspberry_pi_5 (np run, GQ W8-A8): the LSTM's MACs are counted
(the MACs column, job.json, `np report --layers`), and since XNNPACK's quantizer leaves an LSTM float, np report says
so, naming the layer, its MACs and its share of the weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_project

pytestmark = pytest.mark.np_run

MODEL = '''
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[-1])


def tagger():
    torch.manual_seed(0)
    return Tagger().eval(), (torch.randn(4, 1, 6),)
'''
LSTM_MACS = 4 * (6 + 8) * 8 * 4  # gates x (input + hidden) x hidden x steps
LSTM_PARAMS = 4 * 8 * (6 + 8) + 2 * 4 * 8  # weight_ih, weight_hh, two biases
HEAD_PARAMS = 8 * 3 + 3


def test_an_lstm_left_float_by_w8a8_is_counted_and_named_in_the_report(workspace: Path, tmp_path: Path,
                                                                       run_np) -> None:
    (tmp_path / "tagger.py").write_text(MODEL)
    exp = make_project(workspace, "tagger", model=f"{tmp_path / 'tagger.py'}:tagger", steps="gq")
    run = run_np("run", cwd=exp)
    assert run.exit_code == 0, run.stdout + run.stderr

    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    assert job["output"]["macs"] == LSTM_MACS + 8 * 3  # the LSTM's 896 MACs were once 0
    (recurrent,) = job["changes"]["float_recurrent"]
    assert recurrent["module"] == "lstm" and recurrent["class"] == "nn.LSTM" and recurrent["macs"] == LSTM_MACS
    assert recurrent["params"] == LSTM_PARAMS and recurrent["op"] == "lstm"
    assert {r["module"]: r["weight"] for r in job["changes"]["layers"]} == {"fc": "int8 per channel", "lstm": "float"}

    share = round(100 * LSTM_PARAMS / (LSTM_PARAMS + HEAD_PARAMS))
    expected = (f"lstm (nn.LSTM, {LSTM_MACS:,} MACs, {share}% of the weights) stays float under W8-A8: the XNNPACK "
                "quantizer does not quantize recurrent layers")
    report = run_np("report", cwd=exp)
    assert report.exit_code == 0 and f"01_graph_quantize: {expected}" in report.stderr, report.stderr
    # named once: the "most weights stayed float" warning leaves out the layer that has a warning of its own
    assert "of the weights stayed float" not in report.stderr

    layers = run_np("report", "--layers", "GRAPH_QUANTIZE", "--json", cwd=exp).json
    by_key = {row["key"]: row for row in layers["layers"]}
    assert by_key["lstm"]["class"] == "LSTM" and by_key["lstm"]["graph_macs"] == LSTM_MACS
    assert layers["cost"]["total"] == LSTM_MACS + 8 * 3
