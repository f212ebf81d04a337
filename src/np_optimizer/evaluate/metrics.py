"""The evaluation metrics: comparison metrics of a checkpoint's outputs against INPUT_MODEL's (no labels needed), and
task metrics against labels. Pure functions over tensors; each returns plain floats in the unit of `METRIC_UNITS`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from np_optimizer.fidelity import compare_outputs, flat_tensors

__all__ = ["COMPARISON_METRICS", "TASK_METRICS", "ALL_METRICS", "METRIC_UNITS", "comparison_metrics",
           "task_metrics", "class_scores"]

COMPARISON_METRICS = ("SNR", "MSE", "MAE", "MAX_ABS_ERROR", "KLD")
TASK_METRICS = ("TOP1_ACCURACY", "TOP5_ACCURACY")
ALL_METRICS = COMPARISON_METRICS + TASK_METRICS
METRIC_UNITS = {"SNR": "dB", "MSE": "abs^2", "MAE": "abs", "MAX_ABS_ERROR": "abs", "KLD": "nats",
                "TOP1_ACCURACY": "fraction", "TOP5_ACCURACY": "fraction"}


def _flat(outputs: Sequence[Any]) -> Any:
    import torch

    parts = [t.detach().reshape(-1).to(torch.float64) for o in outputs for t in flat_tensors(o)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def class_scores(outputs: Sequence[Any]) -> Any | None:
    """(N, C) scores from each sample's first output when it is shaped (B, C); None when the model is no classifier."""
    import torch

    rows = []
    for out in outputs:
        tensors = flat_tensors(out)
        if not tensors or tensors[0].dim() != 2:
            return None
        rows.append(tensors[0].detach().to(torch.float64))
    return torch.cat(rows) if rows else None


def comparison_metrics(reference: Sequence[Any], outputs: Sequence[Any]) -> dict[str, float | None]:
    """SNR (dB; None with `identical` when equal), MSE, MAE, max abs error over every output element, and KLD (nats,
    mean over samples) of softmax(class scores) when the outputs are class scores."""
    import torch

    fid = compare_outputs(reference, outputs)
    r, t = _flat(reference), _flat(outputs)
    diff = r - t
    out: dict[str, float | None] = {
        "SNR": math.inf if fid["snr_identical"] else fid["snr_db"],
        "MSE": float((diff**2).mean()) if diff.numel() else 0.0,
        "MAE": float(diff.abs().mean()) if diff.numel() else 0.0,
        "MAX_ABS_ERROR": fid["max_abs_error"],
        "KLD": None,
    }
    ref_scores, test_scores = class_scores(reference), class_scores(outputs)
    if ref_scores is not None and test_scores is not None and ref_scores.shape == test_scores.shape:
        p_log = torch.log_softmax(ref_scores, dim=-1)
        q_log = torch.log_softmax(test_scores, dim=-1)
        out["KLD"] = float((p_log.exp() * (p_log - q_log)).sum(-1).mean())
    return out


def task_metrics(outputs: Sequence[Any], labels: Any) -> tuple[dict[str, float], list[str]]:
    """TOP1 and TOP5 accuracy (fractions) of class scores against labels, and why any was left out."""
    import torch

    scores = class_scores(outputs)
    if scores is None or scores.shape[0] != labels.shape[0]:
        return {}, ["TOP1/TOP5 accuracy need class scores shaped (batch, classes) as the model's first output; this "
                    "model's outputs are not, so they are left out."]
    out = {"TOP1_ACCURACY": float((scores.argmax(-1) == labels).to(torch.float64).mean())}
    if scores.shape[1] >= 5:
        top5 = scores.topk(5, dim=-1).indices
        out["TOP5_ACCURACY"] = float((top5 == labels.unsqueeze(-1)).any(-1).to(torch.float64).mean())
        return out, []
    return out, [f"TOP5_ACCURACY needs at least 5 classes; the model gives {scores.shape[1]}, so it is left out."]
