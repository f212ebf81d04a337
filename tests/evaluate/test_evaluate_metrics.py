"""The evaluation metrics on hand-made tensors (pure arithmetic: no model involved), and the best-model rule."""

from __future__ import annotations

import math

import pytest
import torch

from np_optimizer.evaluate.metrics import comparison_metrics, task_metrics
from np_optimizer.records.parts import CompileSummary
from np_optimizer.records.report import RowMetric
from np_optimizer.records.status import CompileStatus
from np_optimizer.report.evaluation import best_row
from np_optimizer.report.model import PipelineRow


def test_comparison_metrics_by_hand() -> None:
    reference = [torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.0, 0.0, 4.0]])]
    outputs = [torch.tensor([[1.0, 2.0, 2.0]]), torch.tensor([[0.0, 1.0, 4.0]])]
    m = comparison_metrics(reference, outputs)
    assert m["MSE"] == pytest.approx(2 / 6) and m["MAE"] == pytest.approx(2 / 6) and m["MAX_ABS_ERROR"] == 1.0
    assert m["SNR"] == pytest.approx(10 * math.log10(30 / 2), abs=1e-3)
    p = torch.softmax(torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 4.0]], dtype=torch.float64), -1)
    q = torch.softmax(torch.tensor([[1.0, 2.0, 2.0], [0.0, 1.0, 4.0]], dtype=torch.float64), -1)
    assert m["KLD"] == pytest.approx(float((p * (p.log() - q.log())).sum(-1).mean()))
    same = comparison_metrics(reference, reference)
    assert same["SNR"] == math.inf and same["KLD"] == pytest.approx(0.0) and same["MSE"] == 0.0
    flat = comparison_metrics([torch.ones(4)], [torch.ones(4) * 2])  # not class scores: no KLD
    assert flat["KLD"] is None and flat["MAE"] == 1.0


def test_task_metrics_by_hand() -> None:
    scores = [torch.tensor([[0.1, 0.9, 0.0, 0.0, 0.0, 0.0]]), torch.tensor([[0.5, 0.1, 0.2, 0.3, 0.4, 0.0]])]
    m, why = task_metrics(scores, torch.tensor([1, 5]))
    assert m == {"TOP1_ACCURACY": 0.5, "TOP5_ACCURACY": 0.5} and why == []
    few, why = task_metrics([torch.tensor([[0.2, 0.8]])], torch.tensor([1]))
    assert few == {"TOP1_ACCURACY": 1.0} and "at least 5 classes" in why[0]
    none, why = task_metrics([torch.zeros(3)], torch.tensor([0]))
    assert none == {} and "class scores" in why[0]


def _row(model: str, **values: float) -> PipelineRow:
    row = PipelineRow(model, model.upper(), "graph_quantize", "success")
    row.metrics = {k: RowMetric(k, v) for k, v in values.items()}
    return row


def test_best_model_rule() -> None:
    a, b, c = _row("a", LATENCY=2.0, TOP1_ACCURACY=0.99), _row("b", LATENCY=1.0, TOP1_ACCURACY=0.9), _row("c")
    assert best_row([a, b, c]) is b  # lowest latency first
    d, e = _row("d", TOP1_ACCURACY=0.97, SNR=20.0), _row("e", TOP1_ACCURACY=0.98, SNR=10.0)
    assert best_row([d, e]) is e  # no latency: highest accuracy, then SNR
    f, g = _row("f", SNR=20.0), _row("g", SNR=30.0)
    assert best_row([f, g]) is g
    assert best_row([c, _row("h")]).model == "h"  # nothing to rank: the last finished one
    float_on_npu, int8 = _row("go", LATENCY=0.25, SNR=139.0), _row("gq", LATENCY=0.25, SNR=41.0)
    float_on_npu.lowering = CompileSummary(status=CompileStatus.UNSUPPORTED, reason="the checkpoint is float")
    int8.lowering = CompileSummary(status=CompileStatus.OK)
    assert best_row([float_on_npu, int8]) is int8  # what the device cannot run is never the best model
