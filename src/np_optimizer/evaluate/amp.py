"""AMP GREEDY on the task metric: with `amp.target_top1_drop` set and a labelled dataset attached, GREEDY scores each
candidate by its TOP1 accuracy on the dataset (the same loading and metric code as the Evaluator) instead of SNR."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError
from np_optimizer.evaluate.inputs import labelled_inputs, num_classes, project_dataset
from np_optimizer.evaluate.metrics import task_metrics

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from np_optimizer.workspace import Project

__all__ = ["top1_objective"]


def top1_objective(project: Project, example_inputs: tuple[Any, ...], program: ExportedProgram,
                   drop: float) -> tuple[Callable[[ExportedProgram], float], float, dict[str, Any]]:
    """(score, target, facts): score = TOP1(candidate) - TOP1(float input of the step) on the project's dataset, run
    as exported programs; GREEDY stops once score >= target = -drop."""
    import torch

    entry = project_dataset(project)
    if entry is None:
        raise ConfigError("graph_quantize amp.target_top1_drop needs a labelled evaluation dataset, and this project "
                          "has none.", hint="Attach one with `np datasets add DIR`, or remove target_top1_drop from "
                          "run.detail.yaml to use target_snr.", code="NP-GQ-422")
    example = tuple(example_inputs)
    root = project.root / str(entry.get("path", "data/evaluation"))
    inputs = labelled_inputs(root, entry, example, num_classes(program, example))
    labels = inputs.labels
    assert labels is not None  # labelled_inputs always has labels

    def top1(program: ExportedProgram) -> float:
        module = program.module()
        with torch.no_grad():
            outputs = [module(*batch) for batch in inputs.batches]
        scores, _why = task_metrics(outputs, labels[: len(outputs) * int(example[0].shape[0])])
        if "TOP1_ACCURACY" not in scores:
            raise ConfigError("graph_quantize amp.target_top1_drop needs class scores shaped (batch, classes) as the "
                              "model's first output.", hint="Use target_snr for this model.", code="NP-GQ-422")
        return scores["TOP1_ACCURACY"]

    base = top1(program)
    facts = {"objective": "TOP1_ACCURACY drop", "target_top1_drop": drop, "float_top1": round(base, 6),
             "dataset": entry.get("name"), "samples": inputs.count,
             "evaluated_on": "exported programs (PyTorch reference kernels) of each candidate"}
    return (lambda program: top1(program) - base), -drop, facts
