"""The execution plan of an experiment: its jobs, and for each profiled checkpoint the method and metrics to expect."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from np_optimizer.config.checkpoints import INPUT_MODEL, checkpoint_of_step, resolve_checkpoint, step_of_checkpoint
from np_optimizer.config.detail_config import PROFILE_DEFAULTS, TOOL_OPTIONS
from np_optimizer.devices import Device, default_method, method_support
from np_optimizer.metrics import HEADLINE
from np_optimizer.records.validation import Plan, PlannedProfile, PlannedStep

if TYPE_CHECKING:
    from np_optimizer.config import ExperimentConfig, StepConfig

__all__ = ["PlannedStep", "PlannedProfile", "Plan", "build_plan", "plan_notes", "job_name", "HEADLINE_METRICS",
           "evaluation_plan"]

HEADLINE_METRICS = HEADLINE  # np_optimizer.metrics: the metrics a profile result is expected to carry
INPUT_JOB = "00_input_model"
_TASK = ("TOP1_ACCURACY", "TOP5_ACCURACY")


def job_name(index: int, kind: str) -> str:
    """`01_graph_optimize`: the 1-based step number plus the step type; the input model's job is 00_input_model."""
    return f"{index:02d}_{kind}"


def _describe(step: StepConfig) -> str:
    fields = {k: v for k, v in asdict(step).items() if k != "kind"}
    return ", ".join(f"{k}={_value(v)}" for k, v in fields.items()) or "no parameters"


def _value(value: Any) -> str:
    """A parameter as run.yaml writes it: null, and (key, value) pairs (graph_quantize's `layers:`) as a mapping."""
    if value is None:
        return "null"
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value) + "}"
    return str(value)


def evaluation_plan(config: ExperimentConfig, device: Device, dataset: dict[str, Any] | None) -> str:
    """One line: what each evaluated checkpoint runs on (.pte here or exported program) and on which inputs."""
    if not config.run.evaluate:
        return ""
    runs = (f"the .pte on this machine's ExecuTorch runtime ({device.backend})" if device.backend_spec.runs_on_host
            else f"the exported program (a {device.backend} .pte cannot run here; NPU int8 arithmetic may differ "
                 "slightly)")
    if dataset is not None:
        data = f"dataset {dataset.get('name')} ({dataset.get('samples')} labelled samples, {dataset.get('format')})"
    else:
        data = f"{config.detail.globals['evaluation']['num_samples']} evaluation inputs (no labels)"
    return f"{runs}; {data}"


def lowered_in_run(config: ExperimentConfig, device: Device) -> tuple[str, ...]:
    """The checkpoints np run lowers for the device, in pipeline order: those listed under `profile:`, INPUT_MODEL
    (the baseline of every comparison: delegation, per-layer placement; its lowering is shared by every experiment
    of the project through the compile cache), the final one (OUTPUT_MODEL: what `np export` hands over), and those
    listed under `evaluate:` when the device's programs run here (evaluated on the .pte). Lowering is most of a
    run's time; a step's checkpoint left out of `profile:` is skipped, as the spec says, and `np profile` lowers it
    on demand (through the compile cache)."""
    kinds = config.run.step_kinds
    wanted = {concrete for _listed, concrete in config.run.resolved_profile()} if config.run.profile else set()
    wanted.update((INPUT_MODEL, resolve_checkpoint("OUTPUT_MODEL", kinds) or INPUT_MODEL))
    if device.backend_spec.runs_on_host:
        wanted.update(c for e in config.run.evaluate if (c := resolve_checkpoint(e.checkpoint, kinds)) is not None)
    order = (INPUT_MODEL, *(checkpoint_of_step(k) for k in kinds))
    return tuple(c for c in order if c in wanted)


def build_plan(config: ExperimentConfig, device: Device, *, method: str | None = None,
               remote_configured: bool = False, evaluation_dataset: dict[str, Any] | None = None) -> Plan:
    """Jobs in order and, per profiled checkpoint, what the device and method will give."""
    steps = tuple(PlannedStep(i, s.kind, job_name(i, s.kind), _describe(s)) for i, s in enumerate(config.run.steps, 1))
    chosen = method or default_method(device, remote_configured=remote_configured)
    profile: tuple[PlannedProfile, ...] | None = None
    if config.run.profile is not None:
        support = method_support(device, chosen, remote_configured=remote_configured)
        entries = []
        for index, (listed, concrete) in enumerate(config.run.resolved_profile()):
            kind = step_of_checkpoint(concrete)
            job = INPUT_JOB if kind is None else next(s.job for s in steps if s.kind == kind)
            given = dict(config.detail.profile_options(index))
            bounded = TOOL_OPTIONS if device.backend_spec.watched else ()  # a static estimate still has a time limit
            options = given if support.result_kind == "measured" else {k: v for k, v in given.items() if k in bounded}
            ignored = {k: v for k, v in given.items() if k not in options and v != PROFILE_DEFAULTS.get(k)}
            entries.append(PlannedProfile(
                listed_as=listed, checkpoint=concrete, job=job, method=chosen, result_kind=support.result_kind,
                metrics=tuple(str(m) for m in support.metrics),
                missing=tuple(str(m) for m in HEADLINE_METRICS if m not in support.metrics),
                scope_note=support.note, options=options, ignored_options=ignored,
            ))
        profile = tuple(entries)
    evaluate = tuple(f"{e.checkpoint} ({','.join(e.metrics)})" for e in config.run.evaluate)
    return Plan(device.name, device.runtime, device.backend, steps, profile, evaluate, total_jobs=len(steps) + 1,
                evaluate_on=evaluation_plan(config, device, evaluation_dataset),
                lowered=lowered_in_run(config, device))


def plan_notes(plan: Plan) -> tuple[str, ...]:
    """What the plan promises less of than run.yaml asks for, said plainly."""
    if any(t in e for e in plan.evaluate for t in _TASK) and "labelled" not in plan.evaluate_on:
        return ("TOP1/TOP5 accuracy need a labelled dataset, and this project has none: they will be left out. "
                "Attach one with `np datasets add DIR`.",)
    return ()
