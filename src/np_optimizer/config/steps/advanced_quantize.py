"""Step advanced_quantize (AQ): eager-level quantization of Linear layers (LLMs) before export."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.config.issues import L_DEVICE, L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue, match, step_params, unknown_keys
from np_optimizer.config.steps.base import StepSpec, register_step_spec
from np_optimizer.quantize.aq.catalog import AQ_ALGORITHMS, AQ_SCHEMES

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = ["AdvancedQuantizeConfig", "SPEC"]


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
    params = step_params(raw, loc, "advanced_quantize", issues)
    if params is None:
        return None
    ploc = f"{loc}[0]" if isinstance(raw, list) else loc
    unknown_keys(params, ("algorithm", "scheme"), ploc, issues)
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
                                "Create the project from the eager model (a built-in name, file.py:factory or a "
                                "Hugging Face folder), or drop advanced_quantize."))
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


SPEC = register_step_spec(StepSpec(
    kind="advanced_quantize", short="aq", checkpoint="ADVANCED_QUANTIZE", abbreviation="AQ",
    logger="AdvancedQuantizer", order=10, config_type=AdvancedQuantizeConfig, parse=parse, options=OPTIONS,
    run_yaml=lambda _backend: ["- advanced_quantize:", "  - algorithm: AWQ", "    scheme: W4-A8_dynamic"],
    scheme_defaults=scheme_defaults,
))
