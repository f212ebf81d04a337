"""advanced_quantize: quantize the eager model's Linear layers (AWQ, GPTQ, ...) before export; the result is the
ADVANCED_QUANTIZE checkpoint, an exported program graph_optimize and graph_quantize take as they take any other."""

from __future__ import annotations

from typing import Any

from np_optimizer.config import AdvancedQuantizeConfig
from np_optimizer.errors import ModelError
from np_optimizer.pipeline.context import StepContext, StepOutcome
from np_optimizer.pipeline.steps.base import register_step

__all__ = ["advanced_quantize"]

GENERATED_SAMPLES = 32  # calibration samples drawn when num_samples is -1 and the project has no dataset


def _eager_model(ctx: StepContext) -> Any:
    from np_optimizer.models.source import ModelSpec, load_model
    from np_optimizer.records import from_dict

    loaded = ctx.run.loaded_model
    spec = from_dict(ModelSpec, ctx.run.project.info["model"])
    if loaded is None:  # INPUT_MODEL was reused under --retry: nothing loaded the model in this process yet
        ctx.progress("loading the eager model")
        loaded = load_model(spec, ctx.run.project.root)
        ctx.run.loaded_model = loaded
    if loaded.module is None:
        raise ModelError(
            f"advanced_quantize needs the model as PyTorch code, but project '{ctx.run.project.name}' holds only an "
            f"exported program ({spec.file}).",
            hint="Create the project from a built-in model, file.py:factory or a Hugging Face folder, or drop "
                 "advanced_quantize and use graph_quantize (which works on .pt2 programs).", code="NP-AQ-422")
    return spec, loaded


def _calibration(ctx: StepContext, spec: Any, num_samples: int) -> tuple[list[Any], str, list[str]]:
    """Calibration inputs: the built-in text for tiny_llm (and for a Hugging Face folder with a tokenizer, when the
    project has no dataset of its own); otherwise the project's dataset, or generated samples with a warning."""
    from np_optimizer.models import hf_folder, llm

    samples: list[Any] | None  # token-id windows; None when a Hugging Face folder ships no tokenizer
    if spec.kind == "builtin" and spec.name == "tiny_llm":
        samples = llm.calibration_samples(num_samples)
        return samples, f"built-in calibration text ({len(samples)} windows of {llm.SEQ_LEN} tokens)", []
    if spec.kind == "hf" and ctx.run.calibration_dir is None:
        samples = hf_folder.hf_calibration_samples(ctx.run.project.root / spec.file, num_samples)
        if samples:
            return samples, (f"built-in calibration text through the model's tokenizer ({len(samples)} windows)"), []
    count = num_samples if num_samples > 0 else (-1 if ctx.run.calibration_dir is not None else GENERATED_SAMPLES)
    inputs = ctx.run.calibration(count)
    return inputs.samples, inputs.source, list(inputs.warnings)


@register_step("advanced_quantize")
def advanced_quantize(ctx: StepContext, config: AdvancedQuantizeConfig) -> StepOutcome:
    import copy

    from np_optimizer.graph.program_io import export_model
    from np_optimizer.quantize.aq import quantize_model

    spec, loaded = _eager_model(ctx)
    options = ctx.options
    num_samples = int(options["parameters"]["calibration"]["num_samples"])
    samples, source, warnings = _calibration(ctx, spec, num_samples)
    for warning in warnings:
        ctx.log.warning(warning)
    ctx.log.info(f"{config.algorithm} {config.scheme} on {len(samples)} calibration samples ({source})")
    model = copy.deepcopy(loaded.module).eval()
    result = quantize_model(model, algorithm=config.algorithm, scheme=config.scheme, options=options,
                            calibration=samples, progress=ctx.progress)
    for adjustment in result.adjustments:
        ctx.log.info(f"  {adjustment['option']}: {adjustment['asked']} -> {adjustment['used']} ({adjustment['why']})")
    summary = result.summary()
    ctx.log.info(f"  {summary['quantized_layers']} Linear layer(s) quantized: weights {summary['weight']}, "
                 f"activations {summary['activation']}; mean layer SNR {summary['mean_layer_weight_snr_db']} dB "
                 f"({summary['seconds']:.1f} s)")
    ctx.progress("exporting the quantized model")
    example = tuple(ctx.run.example_inputs) or tuple(loaded.example_inputs)
    program = export_model(result.model, example)
    changes = {
        "algorithm": config.algorithm, "scheme": config.scheme, "implementation": result.implementation,
        "weight": summary["weight"], "activation": summary["activation"],
        "options_used": {"weight": {"granularity": "GROUP" if result.scheme.weight.group_size else "CHANNEL",
                                    "group_size": result.scheme.weight.group_size,
                                    "calibration_method": result.scheme.weight.method},
                         "activation": {"granularity": result.scheme.activation.granularity,
                                        "mode": result.scheme.activation.mode,
                                        "calibration_method": result.scheme.activation.method},
                         "parameters": {"calibration": {"num_samples": num_samples},
                                        "clip": bool(options["parameters"]["clip"])}},
        "adjustments": result.adjustments,
        "calibration": {"samples": len(samples), "source": source},
        "quantized_layers": len(result.layers),
        "mean_layer_weight_snr_db": summary["mean_layer_weight_snr_db"],
        "layers": result.layers,
        "exported_with": "torch.export.export",
        "seconds": summary["seconds"],
    }
    return StepOutcome(program=program, changes=changes, warnings=warnings,
                       parameters={"algorithm": config.algorithm, "scheme": config.scheme})
