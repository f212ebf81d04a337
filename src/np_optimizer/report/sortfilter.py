"""The --sort and --filter grammar of np report (np-interface.md §4).

    --sort   metric[:asc|desc][,metric...]     default: desc for higher-is-better metrics (snr), asc otherwise
    --filter metric OP number[,metric OP number...]   OP in > < >= <= == != ; conditions are ANDed

Numbers are in the units the table shows: ms, MB (MiB: bytes / 1024**2) for memory, weight memory and .pte size, dB;
accuracies (top1, top5) are fractions 0..1.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from np_optimizer.errors import UsageError
from np_optimizer.metrics import HIGHER_IS_BETTER, SHOWN, MetricType
from np_optimizer.records.base import Record  # ==, hash(), repr() shared: cheaper to define
from np_optimizer.records.report import SortKey

__all__ = ["SORTABLE", "SortKey", "Condition", "parse_sort", "parse_filter", "apply_sort", "apply_filter"]

# --sort/--filter token -> metric type (the CLI's words; aliases for accuracy)
_TOKENS: dict[str, str] = {
    "latency": "LATENCY", "memory": "MEMORY", "macs": "MACS", "params": "PARAMS",
    "model_weight_memory": "MODEL_WEIGHT_MEMORY", "snr": "SNR", "pte_size": "PTE_SIZE",
    "top1": "TOP1_ACCURACY", "top1_accuracy": "TOP1_ACCURACY", "accuracy": "TOP1_ACCURACY",
    "top5": "TOP5_ACCURACY", "top5_accuracy": "TOP5_ACCURACY", "kld": "KLD", "mse": "MSE", "mae": "MAE",
}
# token -> (metric_type, higher is better): the direction is the metric table's (metrics.HIGHER_IS_BETTER)
SORTABLE: dict[str, tuple[str, bool]] = {token: (metric, MetricType(metric) in HIGHER_IS_BETTER)
                                         for token, metric in _TOKENS.items()}
# metrics stored in bytes but shown (and filtered) in MB: the ones the metric table shows scaled
_BYTES_SHOWN_AS_MB = {metric for metric, (_label, unit, scale) in SHOWN.items() if scale != 1.0 and unit == "MB"}
_OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "==": operator.eq,
                                                   "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_EXAMPLES = ("Examples: --sort latency  --sort snr:desc,latency  --filter 'latency<5,snr>=30'  --sort top1  "
             "--filter 'top1>=0.9'")


@dataclass(frozen=True, eq=False, repr=False)
class Condition(Record):
    token: str
    metric_type: str
    op: str
    value: float

    def matches(self, value: float | None) -> bool:
        return value is not None and _OPS[self.op](value, self.value)


def _metric(token: str, flag: str) -> tuple[str, bool]:
    found = SORTABLE.get(token.strip().lower())
    if found is None:
        raise UsageError(f"Unknown metric '{token}' in {flag}.",
                         hint=f"Metrics: {', '.join(SORTABLE)}. {_EXAMPLES}", code="NP-RPT-400")
    return found


def parse_sort(expr: str | None) -> list[SortKey]:
    if not expr:
        return []
    keys: list[SortKey] = []
    for part in expr.split(","):
        token, _, direction = part.strip().partition(":")
        metric, higher_better = _metric(token, "--sort")
        if direction not in ("", "asc", "desc"):
            raise UsageError(f"Invalid direction '{direction}' in --sort.", hint=f"Use asc or desc. {_EXAMPLES}",
                             code="NP-RPT-400")
        if any(k.metric_type == metric for k in keys):
            raise UsageError(f"Metric '{token}' appears twice in --sort.", hint=_EXAMPLES, code="NP-RPT-400")
        descending = direction == "desc" if direction else higher_better
        keys.append(SortKey(token.strip().lower(), metric, descending))
    return keys


_CONDITION = re.compile(r"^\s*([A-Za-z_@0-9]+)\s*(>=|<=|==|!=|>|<)\s*(-?[0-9.eE+-]+)\s*$")


def parse_filter(expr: str | None) -> list[Condition]:
    if not expr:
        return []
    out = []
    for part in expr.split(","):
        match = _CONDITION.match(part)
        if match is None:
            raise UsageError(f"Invalid filter condition '{part.strip()}'.",
                             hint=f"Use metric OP number with OP in {' '.join(_OPS)}; metrics: {', '.join(SORTABLE)}. "
                             f"{_EXAMPLES}", code="NP-RPT-400")
        token, op, number = match.groups()
        metric, _ = _metric(token, "--filter")
        try:
            value = float(number)
        except ValueError:
            raise UsageError(f"'{number}' is not a number in --filter.", hint=_EXAMPLES, code="NP-RPT-400") from None
        if metric in _BYTES_SHOWN_AS_MB:
            value *= 1024 * 1024
        out.append(Condition(token.lower(), metric, op, value))
    return out


def apply_filter(rows: list[Any], conditions: list[Condition], value: Callable[[Any, str], float | None]) -> list[Any]:
    return [r for r in rows if all(c.matches(value(r, c.metric_type)) for c in conditions)]


def apply_sort(rows: list[Any], keys: list[SortKey], value: Callable[[Any, str], float | None]) -> list[Any]:
    """Stable multi-key sort; rows missing a value go last for that key."""
    out = list(rows)
    for key in reversed(keys):
        present = [r for r in out if value(r, key.metric_type) is not None]
        missing = [r for r in out if value(r, key.metric_type) is None]
        present.sort(key=lambda r: value(r, key.metric_type) or 0.0, reverse=key.descending)
        out = present + missing
    return out
