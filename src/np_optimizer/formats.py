"""Number formats: how every view (tables, --plain, the HTML page, log lines) writes a number."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

__all__ = ["humanize_count", "mib", "fmt_number", "fmt_metric", "is_finite"]

_SCALES = ((1.0, ""), (1e3, "K"), (1e6, "M"), (1e9, "G"), (1e12, "T"))


def humanize_count(value: float | None) -> str:
    """1.8G, 11.7M, 3.1K: counts as the report shows them."""
    if value is None:
        return "-"
    index = max((i for i, (limit, _) in enumerate(_SCALES) if abs(value) >= limit), default=0)
    digits = 0 if index == 0 else 1
    if index + 1 < len(_SCALES) and abs(round(value / _SCALES[index][0], digits)) >= 1000:
        index, digits = index + 1, 1  # 999,950 rounds to 1000.0K: say 1.0M
    limit, suffix = _SCALES[index]
    return f"{value / limit:.{digits}f}{suffix}"


def mib(value_bytes: float) -> float:
    """Bytes to MB as the report counts them (1 MB = 1024 x 1024 bytes)."""
    return value_bytes / (1024 * 1024)


def fmt_number(value: float) -> str:
    """2 decimals, or 3 significant digits below 1 (NPU latencies are often tens of microseconds)."""
    return f"{value:.3g}" if 0 < abs(value) < 1 else f"{value:.2f}"


def fmt_metric(metric_type: str, value: float) -> str:
    if metric_type in ("MACS", "PARAMS"):
        return humanize_count(value)
    if metric_type == "MODEL_WEIGHT_MEMORY":
        return f"{mib(value):.2f}"
    if metric_type == "PTE_SIZE":
        return f"{mib(value):.3f}"
    if metric_type == "SNR":
        return f"{value:.2f}"
    if metric_type == "DELEGATED_OPS":
        return f"{value:.0f}"
    return fmt_number(value)


def is_finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
