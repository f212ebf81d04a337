"""run.yaml: the step configs (one dataclass per step kind), the parsed RunConfig, and its validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from np_optimizer.backends import all_scheme_names, backends
from np_optimizer.config.checkpoints import (
    CHECKPOINT_NAMES,
    OUTPUT_MODEL,
    STEP_KINDS,
    canonical_checkpoint,
    resolve_checkpoint,
)
from np_optimizer.config.issues import L_DEVICE, L_REFERENCE, L_SCHEMA, L_SYNTAX, ValidationIssue, did_you_mean
from np_optimizer.devices import Device, backend_schemes
from np_optimizer.quantize.aq.catalog import AQ_ALGORITHMS, AQ_SCHEMES

__all__ = [
    "AQ_ALGORITHMS",
    "AQ_SCHEMES",
    "AMP_MODES",
    "EVALUATE_METRICS",
    "AdvancedQuantizeConfig",
    "GraphOptimizeConfig",
    "GraphQuantizeConfig",
    "StepConfig",
    "RunConfig",
    "EvaluateEntry",
    "validate_run",
]

AMP_MODES = (None, "GREEDY")
EVALUATE_METRICS = ("SNR", "MAX_ABS_ERROR", "MSE", "MAE")
SUPPORTED_VERSIONS = ("1.0",)


@dataclass(frozen=True)
class AdvancedQuantizeConfig:
    """Eager-level quantization of Linear layers (LLMs) before export."""

    algorithm: str
    scheme: str
    kind: str = field(default="advanced_quantize", init=False)


@dataclass(frozen=True)
class GraphOptimizeConfig:
    """Output-preserving graph passes; it takes no parameters."""

    kind: str = field(default="graph_optimize", init=False)


@dataclass(frozen=True)
class GraphQuantizeConfig:
    """PT2E quantization with the backend's quantizer; GREEDY keeps the costliest layers in float."""

    scheme: str
    automatic_mixed_precision: str | None = None
    kind: str = field(default="graph_quantize", init=False)


StepConfig = AdvancedQuantizeConfig | GraphOptimizeConfig | GraphQuantizeConfig


@dataclass(frozen=True)
class EvaluateEntry:
    checkpoint: str
    metrics: tuple[str, ...] = ("SNR",)


@dataclass(frozen=True)
class RunConfig:
    version: str
    steps: tuple[StepConfig, ...]
    profile: tuple[str, ...] | None  # canonical names in list order; None when there is no profile section
    evaluate: tuple[EvaluateEntry, ...] = ()

    @property
    def step_kinds(self) -> tuple[str, ...]:
        return tuple(s.kind for s in self.steps)

    def resolved_profile(self) -> list[tuple[str, str]]:
        """(name as listed, concrete checkpoint) pairs, in list order."""
        out = []
        for name in self.profile or ():
            concrete = resolve_checkpoint(name, self.step_kinds)
            if concrete is not None:
                out.append((name, concrete))
        return out


def _issue(code: str, level: str, loc: str, msg: str, hint: str = "", *, warning: bool = False) -> ValidationIssue:
    return ValidationIssue(code, level, loc, msg, hint, is_warning=warning)


def _match(value: Any, choices: tuple[str, ...]) -> str | None:
    """Case-insensitive match of a scheme or algorithm name to its canonical spelling."""
    if not isinstance(value, str):
        return None
    return next((c for c in choices if c.lower() == value.strip().lower()), None)


def _step_params(raw: Any, loc: str, kind: str, issues: list[ValidationIssue]) -> dict[str, Any] | None:
    """The one parameter mapping of a step (`- graph_quantize: [ {scheme: ...} ]` or a bare mapping)."""
    if isinstance(raw, list):
        if len(raw) != 1 or not isinstance(raw[0], dict):
            issues.append(_issue("R015", L_SCHEMA, loc, f"{kind} takes exactly one parameter mapping, got {len(raw)} item(s).",
                                 f"Write `- {kind}:` followed by one `- scheme: ...` entry."))
            return None
        return raw[0]
    if isinstance(raw, dict):
        return raw
    issues.append(_issue("R015", L_SCHEMA, loc, f"{kind} needs parameters (scheme, ...), got {raw!r}.",
                         f"Write `- {kind}:` followed by `  - scheme: W8-A8`."))
    return None


def _unknown_keys(params: dict[str, Any], allowed: tuple[str, ...], loc: str, issues: list[ValidationIssue]) -> None:
    for key in params:
        if key not in allowed:
            issues.append(_issue("R016", L_SCHEMA, f"{loc}.{key}", f"Unknown parameter '{key}'.", did_you_mean(str(key), allowed)))


def _parse_aq(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
              model: dict[str, Any] | None = None) -> StepConfig | None:
    params = _step_params(raw, loc, "advanced_quantize", issues)
    if params is None:
        return None
    ploc = f"{loc}[0]" if isinstance(raw, list) else loc
    _unknown_keys(params, ("algorithm", "scheme"), ploc, issues)
    algorithm = _match(params.get("algorithm"), AQ_ALGORITHMS)
    scheme = _match(params.get("scheme"), AQ_SCHEMES)
    if algorithm is None:
        issues.append(_issue("R020", L_SCHEMA, f"{ploc}.algorithm",
                             f"advanced_quantize algorithm {params.get('algorithm')!r} is missing or unknown.",
                             did_you_mean(str(params.get("algorithm", "")), AQ_ALGORITHMS)))
    if scheme is None:
        issues.append(_issue("R021", L_SCHEMA, f"{ploc}.scheme",
                             f"advanced_quantize scheme {params.get('scheme')!r} is missing or unknown.",
                             did_you_mean(str(params.get("scheme", "")), AQ_SCHEMES)))
    if device is not None and not device.backend_spec.advanced_quantize:
        supported = ", ".join(b.name for b in backends() if b.advanced_quantize)
        issues.append(_issue("R022", L_DEVICE, loc, f"advanced_quantize makes kernels for {supported}; device "
                             f"'{device.name}' uses backend '{device.backend}'.",
                             f"Remove advanced_quantize, or use a project whose device's backend is {supported}."))
    if model is not None:
        from np_optimizer.config.availability import aq_model_unsupported_reason

        unsupported = aq_model_unsupported_reason(model)
        if unsupported:
            issues.append(_issue("R024", L_DEVICE, loc, unsupported,
                                 "Create the project from the eager model (a built-in name, file.py:factory or a Hugging "
                                 "Face folder), or drop advanced_quantize."))
    if algorithm and scheme:
        from np_optimizer.config.availability import aq_unavailable_reason

        reason = aq_unavailable_reason(algorithm, scheme)
        if reason:
            issues.append(_issue("R023", L_DEVICE, f"{ploc}.algorithm", reason,
                                 "Pick another algorithm; `np validate` lists this before anything runs."))
        return AdvancedQuantizeConfig(algorithm=algorithm, scheme=scheme)
    return None


def _parse_go(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
              model: dict[str, Any] | None = None) -> StepConfig | None:
    if raw not in (None, [], {}):
        issues.append(_issue("R015", L_SCHEMA, loc, "graph_optimize takes no parameters.",
                             "Write `- graph_optimize: null`; pass tuning lives in run.detail.yaml."))
    return GraphOptimizeConfig()


def _parse_gq(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue],
              model: dict[str, Any] | None = None) -> StepConfig | None:
    params = _step_params(raw, loc, "graph_quantize", issues)
    if params is None:
        return None
    ploc = f"{loc}[0]" if isinstance(raw, list) else loc
    _unknown_keys(params, ("scheme", "automatic_mixed_precision"), ploc, issues)
    all_schemes = all_scheme_names()
    scheme = _match(params.get("scheme"), all_schemes)
    if scheme is None:
        issues.append(_issue("R030", L_SCHEMA, f"{ploc}.scheme",
                             f"graph_quantize scheme {params.get('scheme')!r} is missing or unknown.",
                             did_you_mean(str(params.get("scheme", "")), all_schemes)))
    elif device is not None and scheme not in backend_schemes(device.backend):
        issues.append(_issue("R031", L_DEVICE, f"{ploc}.scheme",
                             f"Scheme {scheme} is not supported by the {device.backend} backend of '{device.name}'.",
                             f"Schemes for {device.backend}: {', '.join(backend_schemes(device.backend))}."))
    amp = params.get("automatic_mixed_precision")
    amp_value = _match(amp, ("GREEDY",)) if amp is not None else None
    if amp is not None and amp_value is None:
        issues.append(_issue("R032", L_SCHEMA, f"{ploc}.automatic_mixed_precision",
                             f"automatic_mixed_precision must be null or GREEDY, got {amp!r}.",
                             "Use `automatic_mixed_precision: null` (off) or `GREEDY`."))
    return GraphQuantizeConfig(scheme=scheme, automatic_mixed_precision=amp_value) if scheme else None


_STEP_PARSERS = {"advanced_quantize": _parse_aq, "graph_optimize": _parse_go, "graph_quantize": _parse_gq}


def _parse_steps(raw: Any, device: Device | None, issues: list[ValidationIssue],
                 model: dict[str, Any] | None = None) -> list[StepConfig]:
    if raw is None:
        issues.append(_issue("R010", L_SCHEMA, "steps", "run.yaml has no `steps` list.",
                             "Add `steps:` with at least one of advanced_quantize, graph_optimize, graph_quantize."))
        return []
    if not isinstance(raw, list) or not raw:
        issues.append(_issue("R010", L_SCHEMA, "steps", "`steps` must be a non-empty list.",
                             "Example: `steps:` then `- graph_optimize: null`."))
        return []
    steps: list[StepConfig] = []
    seen: list[str] = []
    for index, entry in enumerate(raw):
        loc = f"steps[{index}]"
        if not isinstance(entry, dict) or len(entry) != 1:
            issues.append(_issue("R011", L_SCHEMA, loc, "Each step must be a single `- <step>: <parameters>` entry.",
                                 f"Steps: {', '.join(STEP_KINDS)}."))
            continue
        (kind, params), = entry.items()
        if kind not in _STEP_PARSERS:
            issues.append(_issue("R012", L_SCHEMA, loc, f"Unknown step '{kind}'.", did_you_mean(str(kind), STEP_KINDS)))
            continue
        if kind in seen:
            issues.append(_issue("R013", L_SCHEMA, loc, f"Step '{kind}' appears more than once.",
                                 "Each step runs at most once per experiment; make another experiment to compare settings."))
            continue
        if seen and STEP_KINDS.index(kind) < STEP_KINDS.index(seen[-1]):
            issues.append(_issue("R014", L_SCHEMA, loc, f"Step '{kind}' cannot come after '{seen[-1]}'.",
                                 "Order the steps advanced_quantize, graph_optimize, graph_quantize."))
        seen.append(kind)
        step = _STEP_PARSERS[kind](params, f"{loc}.{kind}", device, issues, model)
        if step is not None:
            steps.append(step)
    return steps


def _parse_checkpoint_list(raw: Any, section: str, step_kinds: list[str], issues: list[ValidationIssue]) -> list[str]:
    """Canonical names of a `profile:` list; unknown, absent-step and duplicate names are issues."""
    if not isinstance(raw, list):
        issues.append(_issue("R040", L_SCHEMA, section, f"`{section}` must be a list of checkpoint names.",
                             f"Example: `{section}:` then `- INPUT_MODEL`. Names: {', '.join(CHECKPOINT_NAMES)}."))
        return []
    names: list[str] = []
    concrete_seen: dict[str, str] = {}
    for index, item in enumerate(raw):
        loc = f"{section}[{index}]"
        name = canonical_checkpoint(item) if isinstance(item, str) else None
        if name is None:
            issues.append(_issue("R041", L_REFERENCE, loc, f"Unknown checkpoint name {item!r}.",
                                 did_you_mean(str(item), CHECKPOINT_NAMES)))
            continue
        concrete = resolve_checkpoint(name, step_kinds)
        if concrete is None:
            issues.append(_issue("R042", L_REFERENCE, loc, f"{name} is not produced: its step is not in `steps`.",
                                 f"Add the step to `steps`, or remove {name} from `{section}`."))
            continue
        if concrete in concrete_seen:
            first = concrete_seen[concrete]
            same = "" if first == name else f" ({name} is {concrete} in this run)"
            issues.append(_issue("R043", L_REFERENCE, loc, f"{name} is listed twice{same}.",
                                 f"Keep one entry for {concrete}; it was first listed as {first}."))
            continue
        concrete_seen[concrete] = name
        names.append(name)
    return names


def _parse_evaluate(raw: Any, step_kinds: list[str], issues: list[ValidationIssue]) -> list[EvaluateEntry]:
    if not isinstance(raw, list):
        issues.append(_issue("R050", L_SCHEMA, "evaluate", "`evaluate` must be a list.",
                             "Example: `evaluate:` then `- model: GRAPH_QUANTIZE` and `  metrics: [SNR]`."))
        return []
    entries: list[EvaluateEntry] = []
    for index, item in enumerate(raw):
        loc = f"evaluate[{index}]"
        model, metrics = (item, ["SNR"]) if isinstance(item, str) else (
            (item.get("model"), item.get("metrics", ["SNR"])) if isinstance(item, dict) else (None, []))
        names = _parse_checkpoint_list([model], loc, step_kinds, []) if model is not None else []
        if not names:
            issues.append(_issue("R051", L_REFERENCE, f"{loc}.model" if isinstance(item, dict) else loc,
                                 f"evaluate entry needs a checkpoint this run produces, got {model!r}.",
                                 did_you_mean(str(model), CHECKPOINT_NAMES)))
            continue
        if isinstance(metrics, str):
            metrics = [m.strip() for m in metrics.split(",")]
        good = [m for m in (_match(x, EVALUATE_METRICS) for x in metrics) if m]
        for bad in [x for x in metrics if _match(x, EVALUATE_METRICS) is None]:
            issues.append(_issue("R052", L_SCHEMA, f"{loc}.metrics", f"Unknown evaluation metric {bad!r}.",
                                 did_you_mean(str(bad), EVALUATE_METRICS)))
        entries.append(EvaluateEntry(names[0], tuple(good) or ("SNR",)))
    return entries


def validate_run(data: Any, device: Device | None,
                 model: dict[str, Any] | None = None) -> tuple[RunConfig | None, list[ValidationIssue]]:
    """Check run.yaml's parsed data against the schema, the project's device and (when given) the project's model
    entry; a RunConfig when it has no errors."""
    issues: list[ValidationIssue] = []
    if not isinstance(data, dict):
        return None, [_issue("Y002", L_SYNTAX, "(file)", "run.yaml must be a mapping with `version` and `steps`.",
                             "Start from `np experiments create`, which writes a valid run.yaml.")]
    for key in data:
        if key not in ("version", "steps", "profile", "evaluate"):
            issues.append(_issue("R090", L_SCHEMA, str(key), f"Unknown top-level key '{key}'.",
                                 did_you_mean(str(key), ("version", "steps", "profile", "evaluate"))))
    version = data.get("version")
    if version is None:
        issues.append(_issue("R001", L_SCHEMA, "version", "run.yaml has no `version`.", 'Add `version: "1.0"`.'))
    elif str(version) not in SUPPORTED_VERSIONS:
        issues.append(_issue("R002", L_SCHEMA, "version", f"Unsupported version {version!r}.", 'Use `version: "1.0"`.'))
    steps = _parse_steps(data.get("steps"), device, issues, model)
    kinds = [s.kind for s in steps]
    profile: list[str] | None = None
    if data.get("profile") is not None:
        profile = _parse_checkpoint_list(data["profile"], "profile", kinds, issues)
    elif "profile" in data:
        issues.append(_issue("R044", L_SCHEMA, "profile", "`profile:` is empty, so nothing will be profiled.",
                             "List checkpoints under it, or remove the section to skip profiling.", warning=True))
    evaluate = _parse_evaluate(data["evaluate"], kinds, issues) if data.get("evaluate") is not None else []
    if any(not i.is_warning for i in issues):
        return None, issues
    config = RunConfig(version=str(version), steps=tuple(steps),
                       profile=tuple(profile) if profile is not None else None, evaluate=tuple(evaluate))
    return config, issues


def output_alias(config: RunConfig) -> str:
    """What OUTPUT_MODEL means in this run."""
    return resolve_checkpoint(OUTPUT_MODEL, config.step_kinds) or "INPUT_MODEL"
