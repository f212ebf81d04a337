"""Budgets: limits a CI gate enforces on the profiled checkpoints (run.yaml's `budgets:` and `--budget k=v`).

    budgets:
      latency_ms: 20        # at most; measured if available, else estimated (the report says which)
      memory_mb: 1.5        # at most (MB = MiB)
      weight_memory_mb: 1.0
      pte_size_mb: 2
      snr_db_min: 30        # at least

A value is a number, or a string "number unit" whose unit is the key's (`20 ms`, `1.5 MB`). Unknown keys, other
units, negative, non-finite and non-numeric values are issues (run.yaml) or usage errors (--budget).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.config.issues import L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.parsing import issue
from np_optimizer.errors import UsageError, ValidationFailed

__all__ = ["BudgetMetric", "Budget", "BUDGET_METRICS", "parse_budgets", "parse_budget_overrides", "load_budgets",
           "merge_budgets"]


@dataclass(frozen=True)
class BudgetMetric:
    """One budget key: the report metric it limits, its unit, the scale from the stored unit to it, and whether the
    limit is a maximum (latency, memory, sizes) or a minimum (SNR)."""

    key: str
    metric_type: str
    unit: str
    units: tuple[str, ...]  # spellings accepted after a number in a string value
    stored_per_unit: float  # stored value / budget value (bytes per MiB for sizes stored in bytes)
    minimum: bool = False
    label: str = ""


_MIB = 1024.0 * 1024.0
BUDGET_METRICS: dict[str, BudgetMetric] = {m.key: m for m in (
    BudgetMetric("latency_ms", "LATENCY", "ms", ("ms",), 1.0, label="Latency"),
    BudgetMetric("memory_mb", "MEMORY", "MB", ("mb", "mib"), 1.0, label="Memory"),
    BudgetMetric("weight_memory_mb", "MODEL_WEIGHT_MEMORY", "MB", ("mb", "mib"), _MIB, label="Weight memory"),
    BudgetMetric("pte_size_mb", "PTE_SIZE", "MB", ("mb", "mib"), _MIB, label=".pte size"),
    BudgetMetric("snr_db_min", "SNR", "dB", ("db",), 1.0, minimum=True, label="SNR (vs input)"),
    # accuracy floors: fractions correct on the project's labelled dataset (np's evaluate: section or np evaluate)
    BudgetMetric("top1_min", "TOP1_ACCURACY", "fraction", (), 1.0, minimum=True, label="Top1 accuracy"),
    BudgetMetric("top5_min", "TOP5_ACCURACY", "fraction", (), 1.0, minimum=True, label="Top5 accuracy"),
)}


@dataclass(frozen=True)
class Budget:
    key: str
    limit: float  # in the key's unit
    origin: str  # "run.yaml" | "--budget"

    @property
    def metric(self) -> BudgetMetric:
        return BUDGET_METRICS[self.key]


_NUMBER_UNIT = re.compile(r"^\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|infinity))\s*([A-Za-z]*)\s*$",
                          re.IGNORECASE)
_KEYS_HINT = "Budgets: " + ", ".join(f"{m.key} ({m.unit}, {'at least' if m.minimum else 'at most'})"
                                     for m in BUDGET_METRICS.values()) + "."


def _value(key: str, raw: Any) -> tuple[float | None, str | None, str]:
    """(value, None, "") or (None, problem, hint) for one budget value."""
    metric = BUDGET_METRICS[key]
    example = f"Example: `{key}: {0.95 if metric.unit == 'fraction' else 20}` (in {metric.unit})."
    if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
        return None, f"Budget {key} must be a number in {metric.unit}, got {raw!r}.", example
    if isinstance(raw, (int, float)):
        value = float(raw)
    else:
        found = _NUMBER_UNIT.match(str(raw))
        if found is None:
            return None, f"Budget {key} must be a number in {metric.unit}, got {raw!r}.", example
        number, unit = found.groups()
        if unit and unit.lower() not in metric.units:
            return None, f"Budget {key} is in {metric.unit}, got the unit {unit!r}.", \
                f"Give the number in {metric.unit} (`{key}: {number}`), converting it if needed."
        value = float(number)
    if not math.isfinite(value):
        return None, f"Budget {key} must be a finite number, got {raw!r}.", example
    if value < 0:
        return None, f"Budget {key} cannot be negative, got {raw!r}.", example
    if metric.unit == "fraction" and value > 1:
        return None, f"Budget {key} is a fraction of samples correct (0 to 1), got {raw!r}.", \
            f"Write {value / 100:g} for {value:g}%." if value <= 100 else example
    return value, None, ""


def parse_budgets(raw: Any, issues: list[ValidationIssue], *, section: str = "budgets") -> list[Budget]:
    """The `budgets:` mapping of run.yaml; each problem is an issue at `budgets.<key>`."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        issues.append(issue("R060", L_SCHEMA, section, "`budgets` must be a mapping of metric: limit.",
                            "Example: `budgets:` then `  latency_ms: 20`. " + _KEYS_HINT))
        return []
    budgets = []
    for key, value in raw.items():
        loc = f"{section}.{key}"
        if key not in BUDGET_METRICS:
            issues.append(issue("R061", L_SCHEMA, loc, f"Unknown budget metric '{key}'.",
                                did_you_mean(str(key), BUDGET_METRICS) + " Units: ms, MB (MiB), dB."))
            continue
        number, problem, hint = _value(key, value)
        if number is None:
            issues.append(issue("R062", L_SCHEMA, loc, str(problem), hint))
            continue
        budgets.append(Budget(key, number, "run.yaml"))
    return budgets


def parse_budget_overrides(items: list[str] | None) -> list[Budget]:
    """`--budget latency_ms=20` options; a bad one is a usage error (exit 2)."""
    budgets: dict[str, Budget] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip().lower()
        if not sep:
            raise UsageError(f"--budget {item!r} is not metric=value.", hint="Example: --budget latency_ms=20. "
                             + _KEYS_HINT, code="NP-BDG-400")
        if key not in BUDGET_METRICS:
            raise UsageError(f"Unknown budget metric '{key}' in --budget.",
                             hint=did_you_mean(key, BUDGET_METRICS) + " Units: ms, MB (MiB), dB.", code="NP-BDG-400")
        number, problem, hint = _value(key, raw.strip())
        if number is None:
            raise UsageError(f"{problem} (--budget)", hint=hint, code="NP-BDG-400")
        budgets[key] = Budget(key, number, "--budget")
    return list(budgets.values())


def merge_budgets(from_file: list[Budget], overrides: list[Budget]) -> list[Budget]:
    """run.yaml's budgets with the command line's replacing those of the same key, in BUDGET_METRICS order."""
    merged = {b.key: b for b in from_file}
    merged.update({b.key: b for b in overrides})
    return [merged[k] for k in BUDGET_METRICS if k in merged]


def load_budgets(run_path: Path) -> list[Budget]:
    """The budgets of an experiment's run.yaml (read with the bounded YAML reader), without validating the rest of
    the file: `np report --check` reads stored results and this section only. Problems raise ValidationFailed
    (exit 5) with file and line."""
    import dataclasses

    from np_optimizer.config.yamlfile import load_yaml

    if not run_path.is_file():
        return []
    doc, issues = load_yaml(run_path)
    if doc is None:
        raise ValidationFailed(issues, source=run_path.name)
    if not isinstance(doc.data, dict):
        return []
    budgets = parse_budgets(doc.data.get("budgets"), issues)
    if issues:
        placed = [dataclasses.replace(i, file=run_path.name, line=doc.mark(i.location)[0],
                                      column=doc.mark(i.location)[1]) for i in issues]
        raise ValidationFailed(placed, source=run_path.name)
    return budgets
