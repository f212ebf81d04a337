"""Attach a labelled evaluation dataset to a project: check every sample against the project's model (shapes, labels
within its class count), then copy the files into <project>/data/evaluation and record the entry in project.json."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError, UsageError
from np_optimizer.evaluate.inputs import EVALUATION_KEY
from np_optimizer.files import write_json
from np_optimizer.models.source import ModelSpec
from np_optimizer.records import from_dict
from np_optimizer.workspace import PROJECT_FILE, Project, utc_now

__all__ = ["prepare_dataset", "attach_dataset", "parse_channels"]

TARGET = Path("data") / "evaluation"


def parse_channels(text: str | None, flag: str) -> list[float] | None:
    """`--mean 0.485,0.456,0.406`: one number per channel."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes numbers separated by commas, got {text!r}.",
                         hint=f"Example: {flag} 0.5 (one channel) or {flag} 0.485,0.456,0.406.",
                         code="NP-USE-400") from None


def _model_facts(spec: ModelSpec, root: Path) -> tuple[Any, int | None]:
    import torch

    from np_optimizer.evaluate.metrics import class_scores
    from np_optimizer.models.source import load_model

    loaded = load_model(spec, root)
    module = loaded.module if loaded.module is not None else loaded.exported.module()  # type: ignore[union-attr]
    with torch.no_grad():
        scores = class_scores([module(*loaded.example_inputs)])
    return loaded.example_inputs, None if scores is None else int(scores.shape[1])


def prepare_dataset(source: str, spec: ModelSpec, project_root: Path, *, mean: list[float] | None = None,
                    std: list[float] | None = None) -> dict[str, Any]:
    """Check the dataset against the model in `project_root` and copy it there; returns the project.json entry."""
    from np_optimizer.evaluate.dataset import dataset_files, default_transform, detect_format, load_labelled

    folder = Path(source).expanduser()
    kind = detect_format(folder)
    example, classes = _model_facts(spec, project_root)
    if len(example) != 1:
        raise ConfigError(f"Evaluation dataset {folder}: a labelled dataset needs a single-input model; this one "
                          f"takes {len(example)} inputs.", hint="Evaluate without a dataset (np evaluate).",
                          code="NP-DAT-422")
    transform = default_transform(example[0])
    for key, given in (("mean", mean), ("std", std)):
        if given is not None:
            if len(given) not in (1, transform["channels"]) or (key == "std" and any(v <= 0 for v in given)):
                raise UsageError(f"--{key} needs 1 or {transform['channels']} numbers"
                                 f"{' above 0' if key == 'std' else ''}, got {given}.",
                                 hint="One value per input channel.", code="NP-USE-400")
            transform[key] = given * transform["channels"] if len(given) == 1 else given
    data = load_labelled(folder, example[0], num_classes=classes, transform=transform)
    target = project_root / TARGET
    staging = target.with_name(".evaluation-incoming")
    shutil.rmtree(staging, ignore_errors=True)
    base = folder if folder.is_dir() else folder.parent
    for path in dataset_files(folder):
        destination = staging / path.relative_to(base)
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(path, destination)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ConfigError(f"Evaluation file {path} cannot be copied into the project: {exc.strerror or exc}.",
                              hint="Pass a dataset of readable files.", code="NP-DAT-422") from None
    if target.exists():  # the new copy replaces the old one only once it is complete
        shutil.rmtree(target)
    staging.rename(target)
    return {"name": folder.stem if folder.is_file() else folder.name, "path": str(TARGET), "format": kind,
            "samples": len(data), "classes": len(data.classes), "transform": data.transform,
            "source": str(folder.resolve()), "added_at": utc_now()}


def attach_dataset(project: Project, source: str, *, mean: list[float] | None = None,
                   std: list[float] | None = None) -> dict[str, Any]:
    """`np datasets add`: replace the project's evaluation dataset; project.json is rewritten atomically."""
    info = project.info
    spec = from_dict(ModelSpec, info["model"])
    entry = prepare_dataset(source, spec, project.root, mean=mean, std=std)
    info[EVALUATION_KEY] = entry
    write_json(project.root / PROJECT_FILE, info)
    return entry
