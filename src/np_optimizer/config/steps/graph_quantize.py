"""Step graph_quantize (GQ): PT2E quantization with the backend's quantizer; GREEDY keeps the costliest layers in
float."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import all_scheme_names, get_backend
from np_optimizer.config.issues import L_DEVICE, L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue, match, step_params, unknown_keys
from np_optimizer.config.steps.base import StepSpec, register_step_spec

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = ["GraphQuantizeConfig", "AMP_MODES", "SPEC"]

AMP_MODES = (None, "GREEDY")


@dataclass(frozen=True)
class GraphQuantizeConfig:
    """PT2E quantization with the backend's quantizer; GREEDY keeps the costliest layers in float."""

    scheme: str
    automatic_mixed_precision: str | None = None
    kind: str = field(default="graph_quantize", init=False)


OPTIONS: Section = {
    "calibration": {
        "num_samples": Opt(32, "int", "Calibration samples fed to the observers.", minimum=1),
    },
    "amp": {
        "target_snr": Opt(30.0, "number", "GREEDY stops once the output SNR (dB) against the float model "
                          "reaches this."),
        "max_float_layers": Opt(16, "int", "GREEDY keeps at most this many layers in float.", minimum=1),
        "target_top1_drop": Opt(None, "number", "With a labelled evaluation dataset: GREEDY stops once TOP1 accuracy "
                                "is at most this much (a fraction: 0.01 = one point) below the float model's, instead "
                                "of target_snr. null: target_snr.", minimum=0, also=(None,)),
    },
}


def parse(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
          model: dict[str, Any] | None = None) -> GraphQuantizeConfig | None:
    params = step_params(raw, loc, "graph_quantize", issues)
    if params is None:
        return None
    ploc = f"{loc}[0]" if isinstance(raw, list) else loc
    unknown_keys(params, ("scheme", "automatic_mixed_precision"), ploc, issues)
    all_schemes = all_scheme_names()
    scheme = match(params.get("scheme"), all_schemes)
    if scheme is None:
        issues.append(issue("R030", L_SCHEMA, f"{ploc}.scheme",
                            f"graph_quantize scheme {params.get('scheme')!r} is missing or unknown.",
                            did_you_mean(str(params.get("scheme", "")), all_schemes)))
    elif device is not None and scheme not in device.backend_spec.scheme_names:
        schemes = ", ".join(device.backend_spec.scheme_names)
        issues.append(issue("R031", L_DEVICE, f"{ploc}.scheme",
                            f"Scheme {scheme} is not supported by the {device.backend} backend of '{device.name}'.",
                            f"Schemes for {device.backend}: {schemes}."))
    amp = params.get("automatic_mixed_precision")
    amp_value = match(amp, ("GREEDY",)) if amp is not None else None
    if amp is not None and amp_value is None:
        issues.append(issue("R032", L_SCHEMA, f"{ploc}.automatic_mixed_precision",
                            f"automatic_mixed_precision must be null or GREEDY, got {amp!r}.",
                            "Use `automatic_mixed_precision: null` (off) or `GREEDY`."))
    return GraphQuantizeConfig(scheme=scheme, automatic_mixed_precision=amp_value) if scheme else None


def _run_yaml(backend: str) -> list[str]:
    schemes = " | ".join(get_backend(backend).scheme_names)
    return ["- graph_quantize:", f"  - scheme: W8-A8                 # {schemes}",
            "    automatic_mixed_precision: null   # null | GREEDY"]


SPEC = register_step_spec(StepSpec(
    kind="graph_quantize", short="gq", checkpoint="GRAPH_QUANTIZE", abbreviation="GQ", logger="GraphQuantizer",
    order=30, config_type=GraphQuantizeConfig, parse=parse, options=OPTIONS, run_yaml=_run_yaml,
    calibration_samples=lambda section: int(section.get("calibration", {}).get("num_samples", 0)),
))
