"""run.detail.yaml: every tunable default under `detail:`, indexed `profile[N]` and `<step>[0]`, and its validation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from np_optimizer.config.issues import L_REFERENCE, L_SCHEMA, L_SYNTAX, ValidationIssue, did_you_mean
from np_optimizer.config.options import Opt, Section, check_section, merge_defaults
from np_optimizer.config.run_config import RunConfig
from np_optimizer.config.steps import step_spec, step_specs

__all__ = ["GLOBAL_OPTIONS", "RETIRED_OPTIONS", "PROFILE_OPTIONS", "PROFILE_DEFAULTS", "TOOL_OPTIONS", "step_options",
           "DetailConfig", "validate_detail", "spelled_out_detail", "time_limit"]

GLOBAL_OPTIONS: Section = {
    "gpu_device": Opt("cpu", "choice", "np runs on the CPU only.", choices=("cpu",)),
    "seed": Opt(0, "int", "Seed of generated calibration and evaluation inputs.", minimum=0),
    "evaluation": {
        "num_samples": Opt(8, "int", "Inputs used for SNR and max-abs-error against INPUT_MODEL.", minimum=1),
    },
    "reuse_steps": Opt(True, "bool", "Take a step from the step cache when any experiment computed it with the same "
                       "input, configuration and versions; false computes every step, as np run --force does."),
}

# Keys np once wrote or that the reference interface has, but that nothing here reads: refused, with what to do.
RETIRED_OPTIONS: dict[str, tuple[str, str]] = {
    "batch_size": ("detail.batch_size is not used by np: calibration and evaluation inputs take the batch size of "
                   "the model's example input.",
                   "Remove it: np uses the batch size of the model's example input."),
}

PROFILE_OPTIONS: Section = {
    "num_executions": Opt(30, "int", "Timed inference runs of a measured method.", minimum=1),
    "timeout": Opt(60, "number", "Seconds of measurement (device queue wait excluded) before partial results.",
                   minimum=0, exclusive_minimum=True),
    "warmup": Opt(3, "int", "Untimed runs before the timed ones.", minimum=0),
    "num_layer_executions": Opt(10, "int", "Runs with ExecuTorch's event tracer on, after the timed runs, for "
                                "per-layer times (a measured method on a runtime with the tracer; a fast model gets "
                                "more, up to ten times as many, to last 50 ms); 0 turns them off.",
                                minimum=0),
    "time_limit": Opt(600, "number", "Seconds one lowering of this checkpoint for an Ethos-U device (TOSA lowering, "
                      "then Vela) or one MLIA estimate of it may run; np then stops it, records that job's lowering or "
                      "that round as failed with the reason, and keeps what finished before.", minimum=0,
                      exclusive_minimum=True),
}
PROFILE_DEFAULTS: dict[str, Any] = merge_defaults(PROFILE_OPTIONS, None)
# Profile options that bound the tools (lowering, MLIA) whatever the method, so a static estimate uses them too.
TOOL_OPTIONS = ("time_limit",)

def step_options() -> dict[str, Section]:
    """step kind -> its run.detail.yaml `<step>[0]` section."""
    return {s.kind: s.options for s in step_specs()}

_INDEXED = re.compile(r"^(?P<name>[a-z_]+)\[(?P<index>-?\d+)\]$")


@dataclass(frozen=True)
class DetailConfig:
    """Options with every default filled in."""

    globals: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    profile: tuple[dict[str, Any], ...] = ()

    def profile_options(self, index: int) -> dict[str, Any]:
        return self.profile[index] if index < len(self.profile) else dict(PROFILE_DEFAULTS)

    def step_options(self, kind: str) -> dict[str, Any]:
        return self.steps.get(kind) or merge_defaults(step_spec(kind).options, None)


def time_limit(run: RunConfig, detail: DetailConfig, checkpoint: str) -> tuple[float, str]:
    """(seconds, the option that sets them) of a checkpoint's tool runs: its profile[N] entry's time_limit when
    run.yaml lists it under profile:, else the default (the checkpoint is lowered without being profiled)."""
    for index, (_listed, concrete) in enumerate(run.resolved_profile()):
        if concrete == checkpoint:
            return float(detail.profile_options(index)["time_limit"]), f"run.detail.yaml profile[{index}].time_limit"
    return float(PROFILE_DEFAULTS["time_limit"]), (f"the default: {checkpoint} is not listed under profile:, list it "
                                                    "there to set its profile[N].time_limit")


def _issue(code: str, level: str, loc: str, msg: str, hint: str) -> ValidationIssue:
    return ValidationIssue(code, level, loc, msg, hint)


def validate_detail(data: Any, run: RunConfig) -> tuple[DetailConfig | None, list[ValidationIssue]]:
    """Check run.detail.yaml's data against the options and against run.yaml's steps and profile list."""
    if data is None:
        return spelled_out_detail(run), []
    if not isinstance(data, dict) or set(data) != {"detail"}:
        keys = ", ".join(map(str, data)) if isinstance(data, dict) else type(data).__name__
        return None, [_issue("D001", L_SYNTAX, "(file)", f"run.detail.yaml must hold one top-level key `detail:` (found {keys}).",
                             "Put every option under `detail:`; `np experiments detail` writes a complete file.")]
    body = data["detail"] or {}
    if not isinstance(body, dict):
        return None, [_issue("D002", L_SCHEMA, "detail", "`detail` must be a mapping.",
                             "Example: `detail:` then `  profile[0]:` then `    num_executions: 30`.")]
    issues: list[ValidationIssue] = []
    globals_given: dict[str, Any] = {}
    steps_given: dict[str, Any] = {}
    profile_given: dict[int, Any] = {}
    profile_len = len(run.profile or ())
    indexed_names = ("profile", *step_options())
    for key, value in body.items():
        loc = f"detail.{key}"
        match = _INDEXED.match(str(key))
        if str(key) in RETIRED_OPTIONS:
            message, hint = RETIRED_OPTIONS[str(key)]
            issues.append(_issue("D012", L_SCHEMA, loc, message, hint))
            continue
        if str(key) in GLOBAL_OPTIONS:
            globals_given[str(key)] = value
            continue
        if match is None or match["name"] not in indexed_names:
            valid = [*GLOBAL_OPTIONS, *(f"{n}[N]" for n in indexed_names)]
            name = match["name"] if match else str(key)
            issues.append(_issue("D010", L_SCHEMA, loc, f"Unknown key '{key}' in run.detail.yaml.", did_you_mean(name, valid)))
            continue
        name, index = match["name"], int(match["index"])
        if name == "profile":
            if not 0 <= index < profile_len:
                listed = f"profile[0]..profile[{profile_len - 1}]" if profile_len else "no profile entries"
                issues.append(_issue("D020", L_REFERENCE, loc, f"{key} does not index an entry of run.yaml's profile list "
                                     f"({profile_len} entr{'y' if profile_len == 1 else 'ies'}).",
                                     f"Valid here: {listed}. profile[N] is the Nth item of the profile list, from 0."))
                continue
            profile_given[index] = value
            issues += check_section(value, PROFILE_OPTIONS, loc, code_unknown="D023", code_value="D021")
        else:
            if name not in run.step_kinds:
                issues.append(_issue("D030", L_REFERENCE, loc, f"{key} configures a step that is not in run.yaml's steps.",
                                     f"Steps here: {', '.join(run.step_kinds)}."))
                continue
            if index != 0:
                issues.append(_issue("D031", L_REFERENCE, loc, f"{name} has one configuration, so only {name}[0] exists.",
                                     f"Rename the key to {name}[0]."))
                continue
            steps_given[name] = value
            issues += check_section(value, step_spec(name).options, loc, code_unknown="D033", code_value="D032")
    issues += check_section(globals_given, GLOBAL_OPTIONS, "detail", code_unknown="D010", code_value="D011")
    if issues:
        return None, issues
    return _build(run, globals_given, steps_given, profile_given), []


def _scheme_defaults(run: RunConfig, kind: str) -> dict[str, Any]:
    """Option defaults that depend on the step's own config (its scheme, say): the step spec says which."""
    config = next((s for s in run.steps if s.kind == kind), None)
    return step_spec(kind).scheme_defaults(config) if config is not None else {}


def _overlay(base: dict[str, Any], given: Any) -> dict[str, Any]:
    """`given` on top of `base`, section by section."""
    if not isinstance(given, dict):
        return base
    out = dict(base)
    for key, value in given.items():
        out[key] = _overlay(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def _build(run: RunConfig, globals_given: dict[str, Any], steps_given: dict[str, Any],
           profile_given: dict[int, Any]) -> DetailConfig:
    return DetailConfig(
        globals=merge_defaults(GLOBAL_OPTIONS, globals_given),
        steps={kind: merge_defaults(step_spec(kind).options, _overlay(_scheme_defaults(run, kind), steps_given.get(kind)))
               for kind in run.step_kinds},
        profile=tuple(merge_defaults(PROFILE_OPTIONS, profile_given.get(i)) for i in range(len(run.profile or ()))),
    )


def spelled_out_detail(run: RunConfig) -> DetailConfig:
    """Every default, for a run with no run.detail.yaml."""
    return _build(run, {}, {}, {})
