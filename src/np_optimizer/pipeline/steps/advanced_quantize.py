"""Step advanced_quantize (AQ): quantize the eager model's Linear layers (AWQ, GPTQ, ...) before export; the result
is the ADVANCED_QUANTIZE checkpoint, an exported program graph_optimize and graph_quantize take as they take any
other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.config.issues import L_DEVICE, L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue, match, step_params
from np_optimizer.config.steps.base import StepSpec, register_step_spec
from np_optimizer.errors import ModelError
from np_optimizer.pipeline.context import StepContext, StepOutcome
from np_optimizer.quantize.aq.catalog import AQ_ALGORITHMS, AQ_SCHEMES

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = ["AdvancedQuantizeConfig", "SPEC", "advanced_quantize"]

@dataclass(frozen=True)
class AdvancedQuantizeConfig:
    """Eager-level quantization of Linear layers (LLMs) before export."""

    algorithm: str
    scheme: str
    kind: str = field(default="advanced_quantize", init=False)


OPTIONS: Section = {
    "weight": {
        "granularity": Opt("GROUP", "choice", "Weight scale granularity.", choices=("CHANNEL", "GROUP")),
        "group_size": Opt(32, "choice", "Weights per scale with GROUP granularity.", choices=(32, 64, 128)),
        "calibration_method": Opt("MINMAX", "choice", "How weight ranges are found.",
                                  choices=("MINMAX", "HISTOGRAM", "MOVING_AVERAGE_MINMAX", "PERCENTILE")),
    },
    "activation": {
        "granularity": Opt("TOKEN", "choice", "Activation scale granularity.", choices=("TENSOR", "TOKEN")),
        "calibration_method": Opt("MINMAX", "choice", "How activation ranges are found.", choices=("MINMAX",)),
    },
    "parameters": {
        "calibration": {
            "num_samples": Opt(-1, "int", "Calibration samples (-1: all of the calibration text).", minimum=1,
                               also=(-1,)),
        },
        "clip": Opt(True, "bool", "Search weight clipping ranges (AWQ, AutoRound)."),
    },
}


def parse(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
          model: dict[str, Any] | None = None) -> AdvancedQuantizeConfig | None:
    params, ploc = step_params(raw, loc, "advanced_quantize", ("algorithm", "scheme"), issues)
    if params is None:
        return None
    algorithm = match(params.get("algorithm"), AQ_ALGORITHMS)
    scheme = match(params.get("scheme"), AQ_SCHEMES)
    if algorithm is None:
        issues.append(issue("R020", L_SCHEMA, f"{ploc}.algorithm",
                            f"advanced_quantize algorithm {params.get('algorithm')!r} is missing or unknown.",
                            did_you_mean(str(params.get("algorithm", "")), AQ_ALGORITHMS)))
    if scheme is None:
        issues.append(issue("R021", L_SCHEMA, f"{ploc}.scheme",
                            f"advanced_quantize scheme {params.get('scheme')!r} is missing or unknown.",
                            did_you_mean(str(params.get("scheme", "")), AQ_SCHEMES)))
    if device is not None and not device.backend_spec.advanced_quantize:
        from np_optimizer.backends import backends

        supported = ", ".join(b.name for b in backends() if b.advanced_quantize)
        issues.append(issue("R022", L_DEVICE, loc, f"advanced_quantize makes kernels for {supported}; device "
                            f"'{device.name}' uses backend '{device.backend}'.",
                            f"Remove advanced_quantize, or use a project whose device's backend is {supported}."))
    if model is not None:
        from np_optimizer.config.availability import aq_model_unsupported_reason

        unsupported = aq_model_unsupported_reason(model)
        if unsupported:
            issues.append(issue("R024", L_DEVICE, loc, unsupported,
                                "Create the project from the eager model (a built-in name, file.py:factory, "
                                "package.module:factory or a Hugging Face folder), or drop advanced_quantize."))
    if algorithm and scheme:
        from np_optimizer.config.availability import aq_unavailable_reason

        reason = aq_unavailable_reason(algorithm, scheme)
        if reason:
            issues.append(issue("R023", L_DEVICE, f"{ploc}.algorithm", reason,
                                "Pick another algorithm; `np validate` lists this before anything runs."))
        return AdvancedQuantizeConfig(algorithm=algorithm, scheme=scheme)
    return None


def scheme_defaults(config: AdvancedQuantizeConfig) -> dict[str, Any]:
    """8-bit weights take one scale per channel (groups pay off at 4 bits), and static W8-A8 takes one activation
    scale per tensor (per-token scales are a dynamic-scheme feature)."""
    out: dict[str, Any] = {}
    if config.scheme.startswith("W8"):
        out["weight"] = {"granularity": "CHANNEL"}
    if config.scheme == "W8-A8":
        out["activation"] = {"granularity": "TENSOR"}
    return out



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
            hint="Create the project from a built-in model, file.py:factory, package.module:factory or a Hugging Face "
                 "folder, or drop advanced_quantize and use graph_quantize (which works on .pt2 programs).",
            code="NP-AQ-422")
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


SPEC = register_step_spec(StepSpec(
    kind="advanced_quantize", short="aq", checkpoint="ADVANCED_QUANTIZE", abbreviation="AQ",
    logger="AdvancedQuantizer", order=10, config_type=AdvancedQuantizeConfig, parse=parse, options=OPTIONS,
    run=advanced_quantize,
    run_yaml=lambda _backend: ["- advanced_quantize:", "  - algorithm: AWQ", "    scheme: W4-A8_dynamic"],
    scheme_defaults=scheme_defaults,
))
