"""Human wording of profile results: the log lines under "Profiling: <name>"."""

from __future__ import annotations

from np_optimizer.formats import humanize_count, mib
from np_optimizer.records import ProfileResult
from np_optimizer.records.status import RoundStatus

__all__ = ["metric_lines"]


def metric_lines(result: ProfileResult) -> list[str]:
    """The indented metric lines of the spec's log example, each saying how the number was obtained."""
    lines: list[str] = []
    latency = result.metric("LATENCY")
    if latency is not None:
        extras = result.extras.get("latency_ms")
        if result.result_kind == "measured" and isinstance(extras, dict) and extras:
            runs = f", {result.provenance.get('runs_done')} runs" + (" (partial)" if result.partial else "")
            lines.append(f"  Latency: {extras['avg']:.2f} ms (avg), {extras['min']:.2f} ms (min), "
                         f"{extras['max']:.2f} ms (max), {extras['median']:.2f} ms (median){runs}")
        else:
            lines.append(f"  Latency: {latency.value:.3f} ms ({latency.source})")
    memory = result.metric("MEMORY")
    if memory is not None:
        lines.append(f"  Memory:  {memory.value:.2f} MB ({memory.stat or 'peak'}; {memory.source})")
    weights = result.metric("MODEL_WEIGHT_MEMORY")
    if weights is not None:
        lines.append(f"  Weight memory: {mib(weights.value):.3f} MB ({weights.source})")
    macs, params = result.metric("MACS"), result.metric("PARAMS")
    if macs is not None or params is not None:
        parts = []
        if macs is not None:
            parts.append(f"MACs: {humanize_count(macs.value)}")
        if params is not None:
            parts.append(f"Params: {humanize_count(params.value)}")
        either = macs or params
        source = either.source if either else ""
        lines.append(f"  {', '.join(parts)} ({source})")
    if result.status != RoundStatus.SUCCESS and result.error:
        lines.append(f"  Failed: {result.error.message}")
    return lines
