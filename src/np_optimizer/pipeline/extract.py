"""Graph extraction: the project's model exported with torch.export becomes the INPUT_MODEL checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from np_optimizer.models.source import ModelSpec, load_model
from np_optimizer.pipeline.context import RunContext, StepOutcome
from np_optimizer.pipeline.step_cache import folder_digest
from np_optimizer.records import from_dict, to_dict

if TYPE_CHECKING:
    import torch

__all__ = ["extract_input_model", "input_model_hash_payload"]


def input_model_hash_payload(run: RunContext) -> dict[str, Any]:
    """What INPUT_MODEL depends on: the model (project.json's spec, and the stored source's content as it is now: a
    copy edited in place is another model; its example inputs come from it, or from np's own catalogue), the seed and
    the device."""
    spec = run.project.info["model"]
    payload = {"model": spec, "seed": run.config.detail.globals["seed"], "device": run.device.name}
    stored = spec.get("package") or spec.get("file")
    if stored and (run.project.root / stored).exists():
        payload["stored"] = folder_digest(run.project.root / stored)
    if spec.get("kind") == "module":  # an installed module: the version installed now decides the model
        from np_optimizer.models.factory import installed_version

        payload["installed"] = installed_version(from_dict(ModelSpec, spec))
    return payload


def extract_input_model(run: RunContext, artifacts: Path) -> StepOutcome:
    from np_optimizer.graph.program_io import export_model, save_inputs

    spec = from_dict(ModelSpec, run.project.info["model"])
    loaded = load_model(spec, run.project.root)
    run.loaded_model = loaded
    # load_model returns a module whenever it returns no exported program
    program = loaded.exported if loaded.exported is not None else \
        export_model(cast("torch.nn.Module", loaded.module), loaded.example_inputs)
    run.example_inputs = loaded.example_inputs
    save_inputs([loaded.example_inputs], artifacts / "example_inputs.pt")
    shapes = [f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in loaded.example_inputs]
    parameters = {"model": to_dict(spec), "example_inputs": shapes}
    return StepOutcome(program=program, changes={"exported_with": "torch.export.export"}, parameters=parameters)
