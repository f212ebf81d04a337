"""run.yaml: the parsed RunConfig and its validation; each step's config and parser come from its registered spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from np_optimizer.config.budgets import Budget, parse_budgets
from np_optimizer.config.checkpoints import (
    OUTPUT_MODEL,
    canonical_checkpoint,
    checkpoint_names,
    resolve_checkpoint,
    step_kinds,
)
from np_optimizer.config.issues import L_REFERENCE, L_SCHEMA, L_SYNTAX, ValidationIssue, did_you_mean
from np_optimizer.config.parsing import issue, match
from np_optimizer.config.steps import StepConfig, step_specs
from np_optimizer.quantize.aq.catalog import AQ_ALGORITHMS, AQ_SCHEMES

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = [
    "AQ_ALGORITHMS",
    "AQ_SCHEMES",
    "EVALUATE_METRICS",
    "StepConfig",
    "RunConfig",
    "EvaluateEntry",
    "validate_run",
]

EVALUATE_METRICS = ("SNR", "MAX_ABS_ERROR", "MSE", "MAE", "KLD", "TOP1_ACCURACY", "TOP5_ACCURACY")
SUPPORTED_VERSIONS = ("1.0",)
_TOP_LEVEL = ("version", "steps", "profile", "evaluate", "budgets")


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
    budgets: tuple[Budget, ...] = ()  # CI limits (config/budgets.py); checked by np report/run --check

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


_issue, _match = issue, match  # short names for the many calls below


def _parse_steps(raw: Any, device: Device | None, issues: list[ValidationIssue],
                 model: dict[str, Any] | None = None) -> list[StepConfig]:
    specs = {s.kind: s for s in step_specs()}
    kinds = step_kinds()
    if raw is None:
        issues.append(_issue("R010", L_SCHEMA, "steps", "run.yaml has no `steps` list.",
                             f"Add `steps:` with at least one of {', '.join(kinds)}."))
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
                                 f"Steps: {', '.join(kinds)}."))
            continue
        (kind, params), = entry.items()
        if kind not in specs:
            issues.append(_issue("R012", L_SCHEMA, loc, f"Unknown step '{kind}'.", did_you_mean(str(kind), kinds)))
            continue
        if kind in seen:
            issues.append(_issue("R013", L_SCHEMA, loc, f"Step '{kind}' appears more than once.",
                                 "Each step runs at most once per experiment; make another experiment to compare settings."))
            continue
        if seen and kinds.index(kind) < kinds.index(seen[-1]):
            issues.append(_issue("R014", L_SCHEMA, loc, f"Step '{kind}' cannot come after '{seen[-1]}'.",
                                 f"Order the steps {', '.join(kinds)}."))
        seen.append(kind)
        step = specs[kind].parse(params, f"{loc}.{kind}", device, issues, model)
        if step is not None:
            steps.append(step)
    return steps


def _parse_checkpoint_list(raw: Any, section: str, step_kinds: list[str], issues: list[ValidationIssue]) -> list[str]:
    """Canonical names of a `profile:` list; unknown, absent-step and duplicate names are issues."""
    if not isinstance(raw, list):
        issues.append(_issue("R040", L_SCHEMA, section, f"`{section}` must be a list of checkpoint names.",
                             f"Example: `{section}:` then `- INPUT_MODEL`. Names: {', '.join(checkpoint_names())}."))
        return []
    names: list[str] = []
    concrete_seen: dict[str, str] = {}
    for index, item in enumerate(raw):
        loc = f"{section}[{index}]"
        name = canonical_checkpoint(item) if isinstance(item, str) else None
        if name is None:
            issues.append(_issue("R041", L_REFERENCE, loc, f"Unknown checkpoint name {item!r}.",
                                 did_you_mean(str(item), checkpoint_names())))
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
                                 did_you_mean(str(model), checkpoint_names())))
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
        if key not in _TOP_LEVEL:
            issues.append(_issue("R090", L_SCHEMA, str(key), f"Unknown top-level key '{key}'.",
                                 did_you_mean(str(key), _TOP_LEVEL)))
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
    budgets = parse_budgets(data.get("budgets"), issues) if "budgets" in data else []
    if any(not i.is_warning for i in issues):
        return None, issues
    config = RunConfig(version=str(version), steps=tuple(steps),
                       profile=tuple(profile) if profile is not None else None, evaluate=tuple(evaluate),
                       budgets=tuple(budgets))
    return config, issues


def output_alias(config: RunConfig) -> str:
    """What OUTPUT_MODEL means in this run."""
    return resolve_checkpoint(OUTPUT_MODEL, config.step_kinds) or "INPUT_MODEL"
