"""The renderer of one `np profile` round: its results as a table, and its notices and warnings, each said once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from np_optimizer.formats import fmt_number, mib
from np_optimizer.records import ProfileResult
from np_optimizer.records.report import Table
from np_optimizer.records.status import RoundStatus

__all__ = ["round_kind", "round_table", "round_messages", "round_failures"]

_HEADLINE = [("Latency (ms)", "LATENCY"), ("Memory (MB)", "MEMORY"), ("Weight Memory (MB)", "MODEL_WEIGHT_MEMORY"),
             ("MACs", "MACS"), ("Params", "PARAMS")]


def round_kind(results: Sequence[ProfileResult]) -> str:
    """What the successful results are: measured, estimated, mixed, or failed (none succeeded)."""
    kinds = {r.result_kind for r in results if r.status == RoundStatus.SUCCESS}
    if not kinds:
        return "failed"
    return next(iter(kinds)) if len(kinds) == 1 else "mixed"


def _estimator(results: Sequence[ProfileResult]) -> str:
    """` (mlia 0.9 / ethos-u85-256, 500MHz)`: the tool behind the round's estimates, or ''."""
    estimated = next((r for r in results if r.result_kind == "estimated" and r.status == RoundStatus.SUCCESS), None)
    if estimated is None:
        return ""
    p = estimated.provenance
    clock = p.get("core_clock_hz")
    if "target_profile" in p and isinstance(clock, (int, float)):  # an estimate for a target profile (MLIA's)
        return f" ({p['tool']} {p['tool_version']} / {p['target_profile']}, {clock / 1e6:g}MHz)"
    return f" ({p.get('tool')} {p.get('tool_version')})"


def _title(results: Sequence[ProfileResult]) -> str:
    kind = round_kind(results)
    if kind in ("failed", "measured"):
        return f"Profile Results — {kind}"
    detail = _estimator(results)
    return f"Profile Results — {kind}" + (f" (estimated:{detail})" if kind == "mixed" else detail)


def _cell(result: ProfileResult, metric_type: str) -> str:
    metric = result.metric(metric_type)
    if metric is None:
        return "-"
    if metric_type in ("MACS", "PARAMS"):
        return f"{int(metric.value):,}"
    if metric_type == "MODEL_WEIGHT_MEMORY":
        return f"{mib(metric.value):.2f}"
    return fmt_number(metric.value)


def round_table(results: Sequence[ProfileResult], requested_method: str | None) -> Table:
    """One row per checkpoint: a Status column when some failed, a Method column when none was asked for, and the
    headline metrics some result has."""
    shown = [(h, t) for h, t in _HEADLINE if any(r.metric(t) for r in results)]
    failed = any(r.status != RoundStatus.SUCCESS for r in results)
    columns = ["Name"] + (["Status"] if failed else []) + (["Method"] if requested_method is None else []) + \
        [h for h, _ in shown]
    rows = []
    for r in results:
        row = [r.checkpoint.lower() + (" (partial)" if r.partial else "")]
        if failed:
            row.append(r.status.lower())
        if requested_method is None:
            row.append(f"{r.method} ({r.result_kind})")
        row += [_cell(r, t) for _, t in shown]
        rows.append(row)
    return Table(_title(results), columns, rows, [c.lower() for c in columns], [list(r) for r in rows])


def _by_text(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """{warning text: the checkpoints that got it}, in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for name, text in pairs:
        names = grouped.setdefault(text, [])
        if name not in names:
            names.append(name)
    return grouped


def round_messages(results: Sequence[ProfileResult], *, reused: bool) -> tuple[list[str], list[str]]:
    """(notices, warnings) of a round (its failures are round_failures'). A warning shared by every result is said once; one that differs says whose
    it is. The caveats on the numbers hold for reused results too (a float checkpoint quantized by MLIA, say)."""
    notices = []
    if reused:
        notices.append("Every result above reused an earlier estimate of the same compiled checkpoint on the same "
                       "device; nothing new ran. Use --force to estimate again.")
    notices += dict.fromkeys(n for r in results for n in r.notices
                             if not (reused and n.startswith("Reused an earlier")))
    warnings = [text if len(names) == len(results) > 1 else f"{', '.join(names)}: {text}"
                for text, names in _by_text((r.checkpoint.lower(), w) for r in results for w in r.warnings).items()]
    return notices, warnings


def round_failures(results: Sequence[ProfileResult]) -> list[tuple[str, str, str | None]]:
    """(checkpoint, message, hint) of each failed result: the hint is what the round's record stores (what to do
    about an unreachable device, a missing runtime...), so the console says it too."""
    out = []
    for r in results:
        if r.status == RoundStatus.SUCCESS:
            continue
        hint = r.error.hint if r.error else None
        out.append((r.checkpoint.lower(), (r.error.message if r.error else "") or "failed", hint or None))
    return out
