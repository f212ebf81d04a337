"""Evaluate one checkpoint: run it where its numbers mean most (the .pte on this machine's ExecuTorch runtime when the
device's backend runs here, else the exported program), then compute the asked metrics. Every failure becomes a
FAILED record with the error, never a lost round."""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from np_optimizer.devices import Device
from np_optimizer.errors import NpError
from np_optimizer.evaluate.inputs import EvalInputs
from np_optimizer.evaluate.metrics import (
    COMPARISON_METRICS,
    METRIC_UNITS,
    TASK_METRICS,
    comparison_metrics,
    task_metrics,
)
from np_optimizer.records import CheckpointRef, EvaluationResult, MetricValue, from_dict
from np_optimizer.records.parts import CompileSummary, ErrorRecord, EvalDataset
from np_optimizer.records.status import CompileStatus, RoundStatus
from np_optimizer.versions import tool_version
from np_optimizer.workspace import utc_now

__all__ = ["evaluate_checkpoint", "DEFAULT_LABELLED", "DEFAULT_UNLABELLED", "format_metrics"]

DEFAULT_LABELLED = ("TOP1_ACCURACY", "TOP5_ACCURACY", "SNR", "KLD")
DEFAULT_UNLABELLED = ("SNR", "MSE", "MAE", "MAX_ABS_ERROR", "KLD")
_NPU_CAVEAT = ("the exported program (PyTorch reference kernels): the {backend} .pte cannot run on this machine, and "
               "the NPU's int8 arithmetic may differ slightly")


def _runner(ref: CheckpointRef, compile_record: CompileSummary, compile_folder: Path,
            device: Device) -> tuple[Any, str]:
    """A callable from one input batch to the outputs, and what it runs (said in every metric's source)."""
    pte = compile_folder / (compile_record.pte_file or "")
    if device.backend_spec.runs_on_host and compile_record.status == CompileStatus.OK and pte.is_file():
        from np_optimizer.adapters.executorch_runtime import pte_method

        method = pte_method(pte)
        return (lambda batch: tuple(method.execute(list(batch)))), \
            f"the .pte on this machine's ExecuTorch {tool_version('executorch')} runtime ({device.backend})"
    import torch

    from np_optimizer.graph.program_io import load_program

    module = load_program(ref.path).module()

    def run(batch: tuple[Any, ...]) -> Any:
        with torch.no_grad():
            return module(*batch)

    if device.backend_spec.runs_on_host:
        why = f"lowering {compile_record.status or 'not done'}" if compile_record.status != CompileStatus.OK else \
            "no .pte"
        return run, f"the exported program (PyTorch reference kernels; {why} for {device.name})"
    return run, _NPU_CAVEAT.format(backend=device.backend)


def _trim(outputs: list[Any], count: int, batch: int) -> list[Any]:
    """Drop the padded samples of the last batch from its outputs."""
    import torch

    extra = len(outputs) * batch - count
    if extra <= 0 or batch <= 1:
        return outputs
    keep = batch - extra
    from np_optimizer.adapters.torch_private import tree_map

    last = tree_map(
        lambda t: t[:keep] if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch else t, outputs[-1])
    return [*outputs[:-1], last]


def evaluate_checkpoint(*, ref: CheckpointRef, compile_record: CompileSummary, compile_folder: Path, device: Device,
                        inputs: EvalInputs, metrics: tuple[str, ...], trigger: str,
                        log: logging.Logger) -> EvaluationResult:
    started = utc_now()
    base = EvaluationResult(measurement_id=uuid.uuid4().hex[:12], checkpoint=ref.name, job=ref.job,
                            checkpoint_sha256=ref.sha256, device=device.name, backend=device.backend, trigger=trigger,
                            status=RoundStatus.FAILED, started_at=started, dataset=from_dict(EvalDataset, inputs.dataset) if inputs.dataset else None, samples=inputs.count,
                            requested=tuple(metrics))
    try:
        run, evaluated_on = _runner(ref, compile_record, compile_folder, device)
        outputs = [run(batch) for batch in inputs.batches]
    except Exception as exc:  # a checkpoint that cannot run is a failed round, recorded; a bug's traceback is logged
        record = ErrorRecord.of(exc)
        log.error(f"{ref.name.lower()}: evaluation failed: {record.message}",
                  exc_info=None if isinstance(exc, NpError) else exc)
        return replace(base, ended_at=utc_now(), error=record)
    batch = int(inputs.batches[0][0].shape[0]) if inputs.batches and inputs.batches[0][0].dim() else 1
    outputs = _trim(outputs, inputs.count, batch)
    reference = _trim(list(inputs.reference), inputs.count, batch)
    values: dict[str, float | None] = {}
    warnings: list[str] = []
    if any(m in COMPARISON_METRICS for m in metrics):
        values.update(comparison_metrics(reference, outputs))
    if any(m in TASK_METRICS for m in metrics):
        if inputs.labels is None:
            warnings.append("TOP1/TOP5 accuracy need a labelled dataset: attach one with `np datasets add DIR` (or "
                            "`np evaluate --dataset DIR`); they are left out.")
        else:
            task, why = task_metrics(outputs, inputs.labels)
            values.update(task)
            warnings += why
    where = inputs.dataset["name"] if inputs.dataset else "evaluation inputs"
    source = f"{evaluated_on}; {inputs.count} samples of {where}"
    out: list[MetricValue] = []
    for name in metrics:
        value = values.get(name)
        if name == "SNR" and value == math.inf:
            warnings.append("SNR: outputs identical to INPUT_MODEL's (infinite SNR), so no number is stored.")
            continue
        if name == "KLD" and value is None and name in values:
            warnings.append("KLD needs class scores shaped (batch, classes); this model's outputs are not.")
            continue
        if value is None:
            continue
        out.append(MetricValue(name, float(value), METRIC_UNITS[name], source=source,
                               comparison_model="INPUT_MODEL" if name in COMPARISON_METRICS else None))
    return replace(base, status=RoundStatus.SUCCESS, ended_at=utc_now(), evaluated_on=evaluated_on, metrics=tuple(out),
                   warnings=tuple(warnings))


def format_metrics(result: EvaluationResult) -> str:
    """`TOP1 0.9667, SNR 31.20 dB` for log lines."""
    parts = []
    for m in result.metrics:
        name = m.metric_type.replace("_ACCURACY", "")
        parts.append(f"{name} {m.value:.4f}" if m.unit == "fraction" else f"{name} {m.value:.4g} {m.unit}")
    return ", ".join(parts) or "no metric"
