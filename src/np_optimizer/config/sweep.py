"""sweep.yaml: the search space of `np sweep`, its objectives, constraints and strategy, validated like run.yaml
(each problem an issue with a code, a YAML location and a hint). No torch.

    version: "1.0"
    base: experiment_01                  # the experiment whose run.yaml each trial varies
    space:
      graph_optimize: [true, false]      # a step kind: the step present or not
      graph_quantize.scheme: [W8-A8, W8-A16]   # kind.parameter: that step's parameter
    objectives: [{latency: min}, {snr: max}]
    constraints: ["latency <= 20 ms", "snr >= 30"]
    strategy: grid                       # or {optuna: {trials: 12, seed: 0}}, {layers: ...}, {mixed: ...}
    method: mlia                         # the profile method of each trial's np run (default: the device's)
    measure_on: host                     # then measure each trial's last checkpoint on this device (np profile -d)

A trial is the base run.yaml with one value of each dimension (sweep_space.trial_runs); every trial is then validated as a
run.yaml of its own, so a value the device cannot take is reported with the trial that has it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.config.checkpoints import step_kinds
from np_optimizer.config.issues import L_SCHEMA, L_SYNTAX, ValidationIssue, did_you_mean
from np_optimizer.config.parsing import issue
from np_optimizer.metrics import HIGHER_IS_BETTER, UNITS, MetricType

__all__ = ["SweepConfig", "Dimension", "Objective", "Constraint", "Strategy", "validate_sweep",
           "OBJECTIVE_METRICS", "SWEEP_FILE", "load_sweep"]

SWEEP_FILE = "sweep.yaml"
_STRATEGIES = ("grid", "optuna", "layers", "mixed")
_TOP_LEVEL = ("version", "base", "space", "objectives", "constraints", "strategy", "method", "measure_on")
# the words a user writes -> the metric np records
OBJECTIVE_METRICS: dict[str, MetricType] = {
    "latency": MetricType.LATENCY, "memory": MetricType.MEMORY, "pte_size": MetricType.PTE_SIZE,
    "weight_memory": MetricType.MODEL_WEIGHT_MEMORY, "macs": MetricType.MACS, "snr": MetricType.SNR,
    "top1": MetricType.TOP1_ACCURACY, "top5": MetricType.TOP5_ACCURACY, "mse": MetricType.MSE,
}
_CONSTRAINT = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*([A-Za-z%]*)\s*$")
_UNIT_SCALE = {("ms", "ms"): 1.0, ("s", "ms"): 1000.0, ("MB", "MB"): 1.0, ("B", "B"): 1.0, ("KB", "B"): 1024.0,
               ("MB", "B"): 1024.0 ** 2, ("dB", "dB"): 1.0, ("%", "fraction"): 0.01}


@dataclass(frozen=True)
class Dimension:
    path: str  # "graph_quantize.scheme", or a step kind alone (the step present or not)
    values: tuple[Any, ...]

    @property
    def kind(self) -> str:
        return self.path.split(".")[0]

    @property
    def parameter(self) -> str | None:
        """run.yaml's step parameter (kind.param); None for a step alone or a run.detail.yaml option."""
        parts = self.path.split(".")
        return parts[1] if len(parts) == 2 else None

    @property
    def option(self) -> tuple[str, str] | None:
        """run.detail.yaml's (section, option) of the step: graph_quantize.calibration.num_samples."""
        parts = self.path.split(".")
        return (parts[1], parts[2]) if len(parts) == 3 else None


@dataclass(frozen=True)
class Objective:
    name: str  # as written (latency)
    metric: MetricType
    maximize: bool


@dataclass(frozen=True)
class Constraint:
    text: str
    metric: MetricType
    op: str
    limit: float  # in the metric's stored unit

    def holds(self, value: float) -> bool:
        return {"<=": value <= self.limit, ">=": value >= self.limit, "<": value < self.limit,
                ">": value > self.limit}[self.op]


@dataclass(frozen=True)
class Strategy:
    name: str  # grid | optuna | layers | mixed
    trials: int | None = None
    seed: int = 0
    scheme: str | None = None  # layers: the scheme of the first trial, whose per-layer SNR ranks the layers
    keep: tuple[int, ...] = ()  # layers: how many of the most damaging layers each further trial keeps float
    candidates: tuple[str, ...] = ()  # mixed: the formats a layer may take, the base first (sweep/mixed.py)
    budget: str | None = None  # mixed: what a move costs, latency or size
    points: int = 0  # mixed: how many mixed trials along the greedy order (the uniform points come on top)
    measure_from: str = "widest"  # mixed: the uniform trial whose per-layer sensitivity orders the moves (widest|base)
    rest: str | None = None  # mixed: the points' scheme, what no move names (both|widest|base; None: from's)

    @property
    def points_scheme(self) -> str:
        """mixed: the scheme the points are built on (both: each k over each), `rest:` or, without it, `from:`'s."""
        return self.rest or self.measure_from

    @property
    def points_schemes(self) -> tuple[str, ...]:
        """mixed: the schemes each k is built over: base and widest for `rest: both`, else points_scheme alone."""
        return ("base", "widest") if self.points_scheme == "both" else (self.points_scheme,)

    @property
    def fixed_space(self) -> bool:
        """Strategies that vary the layers themselves: every space line takes one value (it applies to each trial)."""
        return self.name in ("layers", "mixed")


@dataclass(frozen=True)
class SweepConfig:
    version: str
    base: str | None
    space: tuple[Dimension, ...]
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    strategy: Strategy
    method: str | None = None
    measure_on: str | None = None  # a device to measure each trial's last checkpoint on (np profile -d)
    warnings: tuple[ValidationIssue, ...] = ()


def _space(raw: Any, issues: list[ValidationIssue]) -> list[Dimension]:
    if not isinstance(raw, dict) or not raw:
        issues.append(issue("S010", L_SCHEMA, "space", "`space` must map run.yaml fields to lists of values.",
                            "Example: `space:` then `  graph_quantize.scheme: [W8-A8, W8-A16]`."))
        return []
    kinds = step_kinds()
    out = []
    for path, values in raw.items():
        loc = f"space.{path}"
        kind = str(path).split(".")[0]
        if kind not in kinds:
            issues.append(issue("S011", L_SCHEMA, loc, f"'{kind}' is not a step of run.yaml.",
                                did_you_mean(kind, kinds)))
            continue
        values = _expand_range(values)
        if not isinstance(values, list) or not values:
            issues.append(issue("S012", L_SCHEMA, loc, f"{path} needs a non-empty list of values or a range, got "
                                f"{values!r}.", f"Write `{path}: [a, b]` or `{path}: {{from: 8, to: 64, step: 8}}`."))
            continue
        parts = str(path).split(".")
        sections, parameters = _step_options(kind), _step_parameters(kind)
        if len(parts) > 3 or (len(parts) == 2 and parts[1] not in parameters) or (  # a trial's check refuses these
                len(parts) == 3 and parts[2] not in sections.get(parts[1], {})):
            known = [f"{kind}.{name}" for name in parameters]
            known += [f"{kind}.{sec}.{opt}" for sec, opts in sections.items() for opt in opts]
            issues.append(issue("S014", L_SCHEMA, loc, f"{path} is not a run.yaml parameter or run.detail.yaml "
                                f"option of {kind}.", did_you_mean(str(path), known) if known else
                                f"{kind} has no run.yaml parameters or run.detail.yaml options."))
            continue
        if "." not in str(path) and not all(isinstance(v, bool) for v in values):
            issues.append(issue("S012", L_SCHEMA, loc, f"{path} (a step) takes true or false, got {values!r}.",
                                f"Write `{path}: [true, false]` to try with and without the step."))
            continue
        if len({repr(v) for v in values}) != len(values):
            issues.append(issue("S013", L_SCHEMA, loc, f"{path} lists a value twice.", "List each value once."))
            continue
        out.append(Dimension(str(path), tuple(values)))
    return out


def _step_parameters(kind: str) -> list[str]:
    """The run.yaml parameters of a step (its config's fields but `kind`): graph_quantize.scheme, ..."""
    from np_optimizer.config.steps import step_spec

    return [f.name for f in dataclasses.fields(step_spec(kind).config_type) if f.name != "kind"]


def _step_options(kind: str) -> dict[str, Any]:
    from np_optimizer.config.steps import step_spec

    options = step_spec(kind).options
    return {section: dict(entries) for section, entries in options.items() if isinstance(entries, dict)}


def _expand_range(values: Any) -> Any:
    """`{from: 8, to: 64, step: 8}` -> [8, 16, ..., 64] (both ends in); anything else as it is."""
    if not isinstance(values, dict) or set(values) != {"from", "to", "step"}:
        return values
    start, stop, step = values["from"], values["to"], values["step"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, stop, step)) or step <= 0 \
            or stop < start or (stop - start) / step > 1000:
        return None
    count = int(round((stop - start) / step)) + 1
    out = [start + i * step for i in range(count)]
    return [int(v) if all(isinstance(x, int) for x in (start, step)) else round(float(v), 12) for v in out]


def _objectives(raw: Any, issues: list[ValidationIssue]) -> list[Objective]:
    words = tuple(OBJECTIVE_METRICS)
    if not isinstance(raw, list) or not raw:
        issues.append(issue("S020", L_SCHEMA, "objectives", "`objectives` must list at least one metric.",
                            "Example: `objectives: [{latency: min}, {snr: max}]`."))
        return []
    out = []
    for index, item in enumerate(raw):
        loc = f"objectives[{index}]"
        if not isinstance(item, dict) or len(item) != 1:
            issues.append(issue("S021", L_SCHEMA, loc, f"An objective is one `metric: min|max`, got {item!r}.",
                                "Example: `- latency: min`."))
            continue
        (name, direction), = item.items()
        if name not in OBJECTIVE_METRICS:
            issues.append(issue("S022", L_SCHEMA, loc, f"Unknown objective metric '{name}'.",
                                did_you_mean(str(name), words)))
            continue
        if direction not in ("min", "max"):
            issues.append(issue("S021", L_SCHEMA, f"{loc}.{name}", f"Direction must be min or max, got {direction!r}.",
                                "Write `min` or `max`."))
            continue
        metric = OBJECTIVE_METRICS[name]
        out.append(Objective(name, metric, direction == "max"))
        if (direction == "max") != (metric in HIGHER_IS_BETTER):
            issues.append(issue("S023", L_SCHEMA, loc, f"{name}: {direction} asks for the worse direction.",
                                f"{name} is better {'higher' if metric in HIGHER_IS_BETTER else 'lower'}; "
                                "keep it only if that is meant.", warning=True))
    if len({o.metric for o in out}) != len(out):
        issues.append(issue("S024", L_SCHEMA, "objectives", "An objective is listed twice.", "List each once."))
    return out


def _constraints(raw: Any, issues: list[ValidationIssue]) -> list[Constraint]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        issues.append(issue("S030", L_SCHEMA, "constraints", "`constraints` must be a list of comparisons.",
                            'Example: `constraints: ["latency <= 20 ms", "snr >= 30"]`.'))
        return []
    out = []
    for index, text in enumerate(raw):
        loc = f"constraints[{index}]"
        found = _CONSTRAINT.match(str(text)) if isinstance(text, str) else None
        if found is None or found.group(1) not in OBJECTIVE_METRICS:
            issues.append(issue("S031", L_SCHEMA, loc, f"Not a constraint: {text!r}.",
                                "Write `metric <= number unit`, with a metric of "
                                f"{', '.join(OBJECTIVE_METRICS)} (e.g. `latency <= 20 ms`)."))
            continue
        name, op, number, unit = found.groups()
        metric = OBJECTIVE_METRICS[name]
        stored = UNITS[metric]
        scale = _UNIT_SCALE.get((unit or stored, stored), 1.0 if not unit or unit == stored else None)
        if scale is None:
            issues.append(issue("S032", L_SCHEMA, loc, f"{name} is recorded in {stored}, not {unit}.",
                                f"Write the limit in {stored}."))
            continue
        out.append(Constraint(str(text), metric, op, float(number) * scale))
    return out


def _strategy(raw: Any, issues: list[ValidationIssue]) -> Strategy:
    if raw is None or raw == "grid":
        return Strategy("grid")
    if isinstance(raw, dict) and set(raw) == {"optuna"} and isinstance(raw["optuna"], dict):
        options = raw["optuna"]
        trials, seed = options.get("trials"), options.get("seed", 0)
        unknown = set(options) - {"trials", "seed"}
        if unknown or not isinstance(trials, int) or isinstance(trials, bool) or trials < 1 or \
                not isinstance(seed, int):
            issues.append(issue("S041", L_SCHEMA, "strategy.optuna", "optuna takes `trials` (a positive count) and "
                                f"an integer `seed`, got {options!r}.", "Example: `strategy: {optuna: {trials: 12, "
                                "seed: 0}}`."))
            return Strategy("optuna", 1, 0)
        return Strategy("optuna", trials, seed)
    if isinstance(raw, dict) and set(raw) == {"layers"} and isinstance(raw["layers"], dict):
        options = raw["layers"]
        scheme, keep = options.get("scheme", "W8-A8"), options.get("keep_float", [1, 2, 4])
        unknown = set(options) - {"scheme", "keep_float"}
        if unknown or not isinstance(scheme, str) or not isinstance(keep, list) or not keep or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in keep) or len(set(keep)) != len(keep):
            issues.append(issue("S042", L_SCHEMA, "strategy.layers", "layers takes `scheme` (the first trial's GQ "
                                "scheme) and `keep_float` (distinct counts of layers to keep float), got "
                                f"{options!r}.", "Example: `strategy: {layers: {scheme: W8-A8, keep_float: [1, 2, "
                                "4]}}`."))
            return Strategy("layers", scheme="W8-A8", keep=(1,))
        return Strategy("layers", scheme=scheme, keep=tuple(keep))
    if isinstance(raw, dict) and set(raw) == {"mixed"}:
        from np_optimizer.config.sweep_mixed import mixed_strategy

        candidates, budget, points, measure_from, rest = mixed_strategy(raw["mixed"], issues)
        return Strategy("mixed", candidates=candidates, budget=budget, points=points, measure_from=measure_from,
                        rest=rest)
    name = next(iter(raw), None) if isinstance(raw, dict) and len(raw) == 1 else raw
    issues.append(issue("S040", L_SCHEMA, "strategy", f"Unknown strategy {raw!r}.",
                        (did_you_mean(str(name), _STRATEGIES) + " " if isinstance(name, str) else "") +
                        "Write `grid`, `{optuna: {trials: 12, seed: 0}}`, `{layers: {scheme: W8-A8, keep_float: "
                        "[1, 2, 4]}}` or `{mixed: {candidates: [W8-A8, W8-A16], budget: latency, points: 8}}`."))
    return Strategy("grid")


def validate_sweep(data: Any) -> tuple[SweepConfig | None, list[ValidationIssue]]:
    """The parsed sweep.yaml, or None with every issue found."""
    issues: list[ValidationIssue] = []
    if not isinstance(data, dict):
        return None, [issue("S001", L_SYNTAX, "", "sweep.yaml must be a mapping.",
                            "Start from the sample: `version: \"1.0\"`, `space:`, `objectives:`.")]
    for key in data:
        if key not in _TOP_LEVEL:
            issues.append(issue("S002", L_SCHEMA, str(key), f"Unknown key '{key}'.", did_you_mean(str(key), _TOP_LEVEL)))
    version = str(data.get("version", ""))
    if version != "1.0":
        issues.append(issue("S003", L_SCHEMA, "version", f"Unsupported sweep.yaml version {version!r}.",
                            'Write `version: "1.0"`.'))
    base = data.get("base")
    if base is not None and not isinstance(base, str):
        issues.append(issue("S004", L_SCHEMA, "base", "`base` names an experiment of the project.",
                            "Example: `base: experiment_01`."))
    strategy = _strategy(data.get("strategy"), issues)
    # the layers and mixed strategies vary the layers themselves: a space is optional (each value fixed for all trials)
    space = [] if strategy.fixed_space and data.get("space") is None else _space(data.get("space"), issues)
    if strategy.fixed_space and any(len(d.values) != 1 for d in space):
        issues.append(issue("S043", L_SCHEMA, "space", f"With the {strategy.name} strategy each space line takes one "
                            "value (it applies to every trial).", "Run a grid sweep first to choose them, then one "
                            f"{strategy.name} sweep with those values."))
    objectives = _objectives(data.get("objectives"), issues)
    constraints = _constraints(data.get("constraints"), issues)
    method = data.get("method")
    if method is not None and not isinstance(method, str):
        issues.append(issue("S005", L_SCHEMA, "method", "`method` names a profiling method (mlia, on-device).",
                            "Example: `method: on-device`."))
    elif method is not None and method not in _methods():
        issues.append(issue("S005", L_SCHEMA, "method", f"Unknown profiling method '{method}'.",
                            did_you_mean(method, _methods())))
    measure_on = data.get("measure_on")
    if measure_on is not None and not isinstance(measure_on, str):
        issues.append(issue("S006", L_SCHEMA, "measure_on", "`measure_on` names a device to measure each trial on.",
                            "Example: `measure_on: host` (this machine, for a CPU project)."))
    if any(not i.is_warning for i in issues):
        return None, issues
    return SweepConfig(version, base, tuple(space), tuple(objectives), tuple(constraints), strategy, method,
                       measure_on), issues


def _methods() -> tuple[str, ...]:
    from np_optimizer.devices import METHODS

    return METHODS


def load_sweep(path: Path) -> SweepConfig:
    """The validated sweep.yaml, or ValidationFailed carrying every issue with its line and column."""
    from np_optimizer.config.loader import _placed
    from np_optimizer.config.yamlfile import load_yaml
    from np_optimizer.errors import NotFoundError, ValidationFailed

    if not path.is_file():
        raise NotFoundError(f"No sweep.yaml at {path}.",
                            hint="Write one in the project folder (np workspace init puts a sample in sample_cpu), "
                                 "or give --file.", code="NP-SWP-404")
    doc, issues = load_yaml(path)
    if doc is None:
        raise ValidationFailed(issues, source=path.name, check="np sweep --dry-run")
    sweep, found = validate_sweep(doc.data)
    placed = _placed(found, doc, path.name)
    if sweep is None:
        raise ValidationFailed(placed, source=path.name, check="np sweep --dry-run")
    return dataclasses.replace(sweep, warnings=tuple(i for i in placed if i.is_warning))
