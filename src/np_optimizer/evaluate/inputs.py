"""What every checkpoint is evaluated on: the project's labelled dataset when it has one (or one given to np evaluate),
else the run's evaluation inputs; and INPUT_MODEL's outputs on them, the reference of the comparison metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from np_optimizer.workspace import Project

__all__ = ["EvalInputs", "project_dataset", "labelled_inputs", "unlabelled_inputs", "num_classes"]

EVALUATION_KEY = "evaluation_dataset"  # project.json


@dataclass
class EvalInputs:
    batches: list[tuple[torch.Tensor, ...]]  # model inputs, each shaped like the example input
    count: int  # real samples (the last batch may be padded to the example's batch size)
    labels: torch.Tensor | None  # (count,) when labelled
    dataset: dict[str, Any] | None  # name, path, format, samples, transform; None for the unlabelled inputs
    source: str
    reference: list[Any] = field(default_factory=list)  # INPUT_MODEL's exported program on `batches`


def project_dataset(project: Project) -> dict[str, Any] | None:
    """The project's attached evaluation dataset (project.json), or None."""
    entry = project.info.get(EVALUATION_KEY)
    return dict(entry) if isinstance(entry, dict) else None


def num_classes(program: Any, example: tuple[torch.Tensor, ...]) -> int | None:
    """Class scores per sample of the model's first output when it is shaped (B, C); None otherwise."""
    import torch

    from np_optimizer.evaluate.metrics import class_scores

    with torch.no_grad():
        scores = class_scores([program.module()(*example)])
    return None if scores is None else int(scores.shape[1])


def labelled_inputs(root: Path, entry: dict[str, Any], example: tuple[torch.Tensor, ...],
                    classes: int | None) -> EvalInputs:
    """The dataset at `root` cut into batches of the example's batch size (the last one padded, its extra outputs
    dropped before any metric)."""
    import torch

    from np_optimizer.evaluate.dataset import load_labelled

    if len(example) != 1:
        raise ConfigError(f"A labelled dataset needs a single-input model; this one takes {len(example)} inputs.",
                          hint="Evaluate without a dataset (comparison metrics on the evaluation inputs).",
                          code="NP-DAT-422")
    data = load_labelled(root, example[0], num_classes=classes, transform=entry.get("transform"))
    batch = int(example[0].shape[0]) if example[0].dim() else 1
    batches: list[tuple[torch.Tensor, ...]] = []
    for start in range(0, len(data), batch):
        chunk = data.inputs[start:start + batch]
        if chunk.shape[0] < batch:
            chunk = torch.cat([chunk, chunk[-1:].expand(batch - chunk.shape[0], *chunk.shape[1:])])
        batches.append((chunk.contiguous(),))
    info = {"name": entry.get("name") or root.name, "path": str(root), "format": data.format, "samples": len(data),
            "classes": len(data.classes), "transform": data.transform}
    return EvalInputs(batches, len(data), data.labels, info, f"dataset {info['name']} ({len(data)} labelled samples)")


def unlabelled_inputs(calibration_dir: Path | None, example: tuple[torch.Tensor, ...], num_samples: int, seed: int,
                      skip: int) -> EvalInputs:
    """The run's evaluation inputs (example input, held-out calibration samples, generated ones): no labels."""
    from np_optimizer.models.inputs import evaluation_inputs

    inputs = evaluation_inputs(calibration_dir, example, num_samples, seed, skip=skip)
    count = len(inputs.samples) * (int(example[0].shape[0]) if example and example[0].dim() else 1)
    return EvalInputs(list(inputs.samples), count, None, None, f"evaluation inputs: {inputs.source}")
