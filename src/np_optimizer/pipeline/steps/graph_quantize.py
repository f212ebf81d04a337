"""Step graph_quantize (GQ): PT2E quantization with the backend's quantizer; GREEDY automatic mixed precision keeps
the costliest layers in float."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import all_scheme_names, get_backend
from np_optimizer.config.issues import L_DEVICE, L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.layer_formats import GRAPH_KEY, layer_issues, parse_layers, parse_sensitivity, step_formats
from np_optimizer.config.options import Opt, Section
from np_optimizer.config.parsing import issue, match, step_params
from np_optimizer.config.steps.base import StepSpec, register_step_spec
from np_optimizer.errors import UnsupportedError
from np_optimizer.pipeline.context import StepContext, StepOutcome

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from np_optimizer.devices import Device
    from np_optimizer.quantize.layer_formats import LayerFormats

__all__ = ["GraphQuantizeConfig", "SPEC", "graph_quantize"]


@dataclass(frozen=True)
class GraphQuantizeConfig:
    """PT2E quantization with the backend's quantizer; GREEDY keeps the costliest layers in float."""

    scheme: str
    automatic_mixed_precision: str | None = None
    keep_float: tuple[str, ...] = ()  # module paths left in float (np sweep's layers strategy writes them)
    layers: tuple[tuple[str, str], ...] = ()  # (module-path pattern, format) in file order: the last match wins
    sensitivity: tuple[str, ...] = ()  # candidate formats, the base first (pipeline/sensitivity.py); () off
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
    "embedding": {
        "bits": Opt(8, "choice", "Weight-only quantization of the embedding tables (nn.Embedding) the backend's "
                    "quantizer leaves float, lowered to ExecuTorch's quantized embedding kernels: 8 (int8, one scale "
                    "per row), 4 (int4, one scale per group_size weights of a row) or null (tables stay float).",
                    choices=(8, 4), also=(None,)),
        "group_size": Opt(32, "choice", "With bits 4: weights per scale along a row (must divide the row).",
                          choices=(32, 64, 128)),
    },
}


def parse(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
          model: dict[str, Any] | None = None) -> GraphQuantizeConfig | None:
    params, ploc = step_params(raw, loc, "graph_quantize", ("scheme", "automatic_mixed_precision", "keep_float",
                                                            "layers", "sensitivity"), issues)
    if params is None:
        return None
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
    keep = params.get("keep_float") or []
    if not isinstance(keep, list) or not all(isinstance(k, str) and k for k in keep):
        issues.append(issue("R033", L_SCHEMA, f"{ploc}.keep_float",
                            f"keep_float lists module paths (as np report --layers names them), got {keep!r}.",
                            "Example: `keep_float: [features.0, classifier.1]`."))
        keep = []
    layers = parse_layers(params.get("layers"), f"{ploc}.layers", device, issues)
    if scheme and layers and device is not None and (model or {}).get(GRAPH_KEY) is not None:
        issues.extend(layer_issues(scheme, layers, (model or {})[GRAPH_KEY], device, f"{ploc}.layers"))
    sensitivity = parse_sensitivity(params.get("sensitivity"), f"{ploc}.sensitivity", device, issues)
    return GraphQuantizeConfig(scheme=scheme, automatic_mixed_precision=amp_value, keep_float=tuple(keep),
                               layers=layers, sensitivity=sensitivity) if scheme else None


def _run_yaml(backend: str) -> list[str]:
    schemes = " | ".join(get_backend(backend).scheme_names)
    return ["- graph_quantize:", f"  - scheme: W8-A8                 # {schemes}",
            "    automatic_mixed_precision: null   # null | GREEDY"]


def _snr(program: ExportedProgram, inputs: list[Any], reference: list[Any]) -> float:
    import torch

    from np_optimizer.fidelity import snr_db

    with torch.no_grad():
        outputs = [program.module()(*x) for x in inputs]
    return snr_db(reference, outputs)


def graph_quantize(ctx: StepContext, config: GraphQuantizeConfig) -> StepOutcome:
    from np_optimizer.pipeline.sensitivity import sensitivity_step
    from np_optimizer.quantize.aq.program import aq_layers
    from np_optimizer.quantize.pt2e import quantized_layers

    device = ctx.run.device
    # Linear layers advanced_quantize already quantized stay as they are: the PT2E quantizer must not annotate them.
    prequantized = aq_layers(ctx.program)
    # Integer arithmetic (position ids, mask indices in Hugging Face graphs) is not passed as keep_float: the
    # quantizers leave it alone once its scalars keep their dtype (quantize/pt2e.py), and on the Arm quantizer a
    # keep_float integer op splits the NPU partitions where Vela then finds a quantize without its producer (BERT on
    # alif_e8: "TOSA FB Reader error: Output tensor ... does not have any writers").
    aq_modules = frozenset(row["module"] for row in prequantized)
    calibration = ctx.run.calibration(int(ctx.options["calibration"]["num_samples"]))
    for warning in calibration.warnings:
        ctx.log.warning(warning)

    asked_float = frozenset(config.keep_float)
    always_float = aq_modules | asked_float
    formats, format_warnings = _layer_formats(ctx, config)
    quantize, embeddings = _quantizer(ctx, config, calibration.samples, always_float, formats)
    ctx.progress(f"quantizing {config.scheme} on {len(calibration.samples)} calibration samples")
    program = quantize()
    changes: dict[str, Any] = {"scheme": config.scheme, "backend": device.backend,
                               "calibration": {"samples": len(calibration.samples), "source": calibration.source}}
    if prequantized:
        changes["advanced_quantize_layers"] = {
            "kept_as_is": [row["module"] for row in prequantized], "count": len(prequantized),
            "how": "passed to the PT2E quantizer as keep_float (not annotated, not observed, weights untouched)"}
    if config.automatic_mixed_precision == "GREEDY":
        program, changes["amp"] = _greedy(ctx, quantize, program, skip=aq_modules)
    layers = quantized_layers(program)
    # every quantized Linear described from its own q/dq ops (per channel, int4 groups, per-token); only the layers
    # advanced_quantize made are labelled as its (by module: PT2E's Linears carry the same q/dq pattern)
    by_node = {row["node"]: row for row in aq_layers(program)}
    for row in layers:
        if row["node"] in by_node:
            row.update(weight=by_node[row["node"]]["weight"], activation=by_node[row["node"]]["activation"])
            if row["module"] in aq_modules:
                row["source"] = "advanced_quantize"
    changes["layers"] = layers
    changes["quantized_layers"] = sum(1 for row in layers if row["weight"] != "float")
    changes["float_layers"] = [row["module"] for row in layers if row["weight"] == "float"]
    changes.update(_formats_record(ctx, config, formats, always_float) if formats is not None else {})
    warnings = list(calibration.warnings) + format_warnings + sensitivity_step(  # off unless asked: it is costly
        ctx, config.sensitivity, calibration.samples, always_float, changes)
    if asked_float:
        known = {row["module"] for row in layers}
        changes["keep_float"] = sorted(asked_float)
        unknown = sorted(asked_float - known)
        if unknown:
            warnings.append(f"keep_float names no layer of the model: {', '.join(unknown)} (np report --layers "
                            "lists the module paths)")
    bits = ctx.options["embedding"]["bits"]
    changes["embedding"] = _embedding_summary(ctx.program, layers, embeddings.get(id(program), {}), bits)
    kept = aq_modules | asked_float | frozenset((changes.get("amp") or {}).get("float_layers") or [])
    if bits is None:  # the float tables are the configuration's, not the quantizer's doing
        kept |= frozenset(row["module"] for row in changes["embedding"]["layers"])
    warnings += _float_warnings(ctx, program, kept, config.scheme, changes)
    return StepOutcome(program=program, changes=changes, warnings=warnings)


def _float_warnings(ctx: StepContext, program: ExportedProgram, kept: frozenset[str], scheme: str,
                    changes: dict[str, Any]) -> list[str]:
    """What the quantizer left float, recorded in `changes`: one warning per recurrent layer (an LSTM, GRU or RNN,
    whatever its share: XNNPACK quantizes none), and one when most of the other weights stayed float."""
    from np_optimizer.layers.weights import (
        float_recurrent,
        float_recurrent_warnings,
        float_weights,
        float_weights_warning,
    )

    backend = ctx.run.device.backend
    kept |= frozenset(row["module"] for row in (changes.get("layer_formats") or {}).get("by_layer", [])
                      if row["format"] == "float")  # float by `layers:`: the configuration's doing
    changes["float_weights"] = float_weights(program, kept)  # weights the quantizer left float, per layer
    recurrent = float_recurrent(program, kept)
    warnings = float_recurrent_warnings(recurrent, scheme, backend)
    for text in warnings:
        ctx.log.warning(text)
    if recurrent:
        changes["float_recurrent"] = recurrent
    mostly_float = float_weights_warning(changes["float_weights"], scheme, backend,
                                         named=frozenset(row["module"] for row in recurrent))
    return warnings + ([mostly_float] if mostly_float else [])


def _reads_user_input(program: ExportedProgram, node: Any) -> bool:
    """Whether a node's value depends on a user input of the program (else it is computed from constants only)."""
    inputs, seen, stack = set(program.graph_signature.user_inputs), set(), [node]
    while stack:
        item = stack.pop()
        if getattr(item, "name", None) in inputs:
            return True
        if hasattr(item, "all_input_nodes") and item.name not in seen:
            seen.add(item.name)
            stack.extend(item.all_input_nodes)
    return False


def _layer_formats(ctx: StepContext, config: GraphQuantizeConfig) -> tuple[LayerFormats | None, list[str]]:
    """`layers:` and the backend's limits on the step's input program, before anything quantizes or compiles (None:
    the scheme everywhere, as before): a pattern matching nothing is a warning, a refused format an error."""
    from np_optimizer.quantize.layer_formats import program_keys

    formats, found, moved = step_formats(config.scheme, config.layers, program_keys(ctx.program), ctx.run.device)
    refused = next((i for i in found if not i.is_warning), None)
    if refused is not None:
        raise UnsupportedError(refused.message, hint=f"{refused.hint} (np validate shows the line)", code="NP-GQ-422")
    warnings = [f"{i.message} {i.hint}" for i in found]
    for text in warnings:
        ctx.log.warning(text)
    for module, why in moved:  # the backend's limits: said here, recorded in changes.layer_formats
        ctx.log.info(f"  {module}: {why}")
    return formats, warnings


def _formats_record(ctx: StepContext, config: GraphQuantizeConfig, formats: LayerFormats,
                    always_float: frozenset[str]) -> dict[str, Any]:
    """job.json's `layer_formats`: run.yaml's patterns, and each layer's format and why."""
    from np_optimizer.quantize.pt2e import format_rows

    return {"layer_formats": {"layers": [list(pair) for pair in config.layers],
                              "by_layer": format_rows(formats, ctx.program, always_float,
                                                       io=ctx.run.device.backend_spec.io_formats)}}


def _quantizer(ctx: StepContext, config: GraphQuantizeConfig, samples: list[Any], always_float: frozenset[str],
               formats: LayerFormats | None = None
               ) -> tuple[Callable[..., ExportedProgram], dict[int, dict[str, Any]]]:
    """quantize(keep_float) -> the PT2E-quantized program, its embedding tables quantized as the `embedding` option
    says; and, per program it made (by id), what the option did in it (GREEDY quantizes many times)."""
    from np_optimizer.quantize.embedding import quantize_embeddings
    from np_optimizer.quantize.pt2e import quantize_program

    device, embedding = ctx.run.device, ctx.options["embedding"]
    reports: dict[int, dict[str, Any]] = {}

    def quantize(keep_float: frozenset[str] = frozenset()) -> ExportedProgram:
        program = quantize_program(ctx.program, backend=device.backend, scheme=config.scheme,
                                   target=device.mlia_target, calibration=samples,
                                   keep_float=keep_float | always_float, formats=formats)
        if embedding["bits"] is None:
            return program
        program, report = quantize_embeddings(program, bits=int(embedding["bits"]),
                                              group_size=int(embedding["group_size"]),
                                              keep_float=keep_float | always_float)
        reports[id(program)] = report
        return program

    return quantize, reports


def _embedding_summary(source: ExportedProgram, layers: list[dict[str, str]], done: dict[str, Any],
                       bits: int | None) -> dict[str, Any]:
    """What became of each embedding of the step's input: quantized by the `embedding` option (done's rows), by the
    backend's quantizer (the Arm quantizer's gather on its own quantized table), or left float."""
    from np_optimizer.quantize.embedding import EMBEDDING_OP
    from np_optimizer.quantize.pt2e import module_path

    lookups = [n for n in source.graph.nodes if str(n.target) == EMBEDDING_OP]
    modules = list(dict.fromkeys(module_path(n) for n in lookups))
    constant = {module_path(n) for n in lookups if not _reads_user_input(source, n.args[1])}
    option = {row["module"]: row for row in done.get("layers") or []}
    float_reason = {row["module"]: row["reason"] for row in done.get("left_float") or []}
    after = {row["module"]: row for row in layers if row["activation"] == "indices"}
    rows = []
    for module in modules:
        if module in option:
            rows.append({**option[module], "by": "embedding option"})
        elif module not in after:  # position / token-type ids are constants: PT2E folded the lookup at convert
            rows.append({"module": module, "weight": "folded", "reason": "its indices are constants of the model, so "
                         "its output became a constant of the quantized program (no lookup is left)"
                         if module in constant else "no lookup of this module is left in the quantized program"})
        elif after[module]["weight"] == "float":
            reason = float_reason.get(module) or ("embedding.bits is null" if bits is None else "not quantized")
            rows.append({"module": module, "weight": "float", "reason": reason})
        else:
            rows.append({"module": module, "weight": after[module]["weight"], "by": "the backend's quantizer"})
    return {"bits": bits, "group_size": done.get("group_size"), "layers": rows}


def _greedy(ctx: StepContext, quantize: Any, full: ExportedProgram,
            skip: frozenset[str] = frozenset()) -> tuple[ExportedProgram, dict[str, Any]]:
    """Keep in float, one at a time, the layers whose quantization costs the most output SNR, until the target SNR.

    Sensitivity of a layer = SNR of the model with only that layer left in float; layers are added in order of
    that SNR (highest first) until the step's output SNR against its float input reaches `target_snr`, or
    `max_float_layers` are float. Each candidate's per-layer SNR in the fully quantized model is recorded beside its
    sensitivity. Why the ranking does not use the per-layer SNR itself (one pass instead of one quantization per
    layer): keeping a layer float changes which edges PT2E quantizes around it, which the per-layer error of the
    quantized model does not predict; on a ResNet-like model the per-layer ranking needed 5 float layers for the
    gain this ranking gets with 1 (measured for issue 12).
    """
    from np_optimizer.fidelity import snr_db
    from np_optimizer.layers.lineage import module_map
    from np_optimizer.layers.numerics import layer_snr, tap
    from np_optimizer.quantize.pt2e import weighted_layers

    amp = ctx.options["amp"]
    target, limit = float(amp["target_snr"]), int(amp["max_float_layers"])
    evaluation = ctx.run.evaluation.samples if ctx.run.evaluation else [ctx.run.example_inputs]

    if amp.get("target_top1_drop") is not None:  # the task metric on the labelled dataset instead of SNR
        return _greedy_on(ctx, quantize, full, skip, float(amp["target_top1_drop"]), limit)
    # one pass each gives the outputs and every layer's, so each candidate's per-layer SNR in the fully quantized
    # model (the numbers np report --layers shows) comes with the ranking at no extra run
    float_taps, full_taps = tap(ctx.program, evaluation), tap(full, evaluation)
    reference = float_taps.outputs
    snr_all = snr_db(reference, full_taps.outputs)
    record: dict[str, Any] = {"mode": "GREEDY", "target_snr_db": target, "max_float_layers": limit,
                              "snr_all_quantized_db": round(snr_all, 3), "float_layers": [], "trail": []}
    if snr_all >= target:
        record["result"] = f"target met with every layer quantized ({snr_all:.2f} dB)"
        record["achieved_snr_db"] = round(snr_all, 3)
        return full, record
    modules = list(dict.fromkeys(module for _node, module in weighted_layers(ctx.program) if module not in skip))
    sensitivity = []
    for index, module in enumerate(modules, 1):
        ctx.progress(f"GREEDY sensitivity {index}/{len(modules)}: {module}")
        sensitivity.append((_snr(quantize(frozenset({module})), evaluation, reference), module))
    sensitivity.sort(reverse=True)
    per_layer = {row["key"]: row.get("snr_db") for row in
                 layer_snr(float_taps, full_taps, module_map(float_taps.graph, full_taps.graph))}
    record["sensitivity"] = [{"module": m, "snr_db_if_float": round(s, 3), "layer_snr_db": per_layer.get(m)}
                             for s, m in sensitivity]
    chosen: list[str] = []
    program, snr = full, snr_all
    for _gain, module in sensitivity[:limit]:
        chosen.append(module)
        ctx.progress(f"GREEDY: {len(chosen)} float layer(s)")
        program = quantize(frozenset(chosen))
        snr = _snr(program, evaluation, reference)
        record["trail"].append({"float_layers": list(chosen), "snr_db": round(snr, 3)})
        ctx.log.info(f"  GREEDY: kept {module} in float -> SNR {snr:.2f} dB (target {target:g} dB)")
        if snr >= target:
            break
    record["float_layers"] = chosen
    record["achieved_snr_db"] = round(snr, 3)
    record["result"] = ("target met" if snr >= target
                        else f"target not met after {len(chosen)} float layer(s) (max_float_layers={limit})")
    return program, record


def _greedy_on(ctx: StepContext, quantize: Any, full: ExportedProgram, skip: frozenset[str], drop: float,
               limit: int) -> tuple[ExportedProgram, dict[str, Any]]:
    """GREEDY with TOP1 accuracy as the score: the layers whose float copy recovers the most accuracy go first."""
    from np_optimizer.evaluate.amp import top1_objective
    from np_optimizer.quantize.pt2e import weighted_layers

    score, target, facts = top1_objective(ctx.run.project, ctx.run.example_inputs, ctx.program, drop)
    achieved = score(full)
    record: dict[str, Any] = {"mode": "GREEDY", **facts, "max_float_layers": limit,
                              "top1_drop_all_quantized": round(-achieved, 6), "float_layers": [], "trail": []}
    program = full
    if achieved < target:
        modules = list(dict.fromkeys(m for _node, m in weighted_layers(ctx.program) if m not in skip))
        ranked = sorted(((score(quantize(frozenset({m}))), m) for m in modules), reverse=True)
        record["sensitivity"] = [{"module": m, "top1_change_if_float": round(s, 6)} for s, m in ranked]
        for _gain, module in ranked[:limit]:
            record["float_layers"].append(module)
            program = quantize(frozenset(record["float_layers"]))
            achieved = score(program)
            record["trail"].append({"float_layers": list(record["float_layers"]), "top1_drop": round(-achieved, 6)})
            ctx.log.info(f"  GREEDY: kept {module} in float -> TOP1 drop {-achieved:.4f} (target {drop:g})")
            if achieved >= target:
                break
    record["achieved_top1_drop"] = round(-achieved, 6)
    record["result"] = ("target met" + (" with every layer quantized" if not record["float_layers"] else "")
                        if achieved >= target else
                        f"target not met after {len(record['float_layers'])} float layer(s) (max_float_layers={limit})")
    ctx.log.info(f"  GREEDY on TOP1: float {facts['float_top1']:.4f}, drop {-achieved:.4f} "
                 f"(target {drop:g}, {facts['samples']} samples of {facts['dataset']}): {record['result']}")
    return program, record


SPEC = register_step_spec(StepSpec(
    kind="graph_quantize", short="gq", checkpoint="GRAPH_QUANTIZE", abbreviation="GQ", logger="GraphQuantizer",
    order=30, config_type=GraphQuantizeConfig, parse=parse, options=OPTIONS, run=graph_quantize, run_yaml=_run_yaml,
    calibration_samples=lambda section: int(section.get("calibration", {}).get("num_samples", 0)),
))
