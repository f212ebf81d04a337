"""Views of `np report`: one registered function per output format, printing a ReportRecord.

    @report_view("plain")
    def plain(record: ReportRecord) -> None: ...

`np report` picks the view from its flags (--json, --plain, else the table); a new format (HTML, say) is one
decorated function here or in a module imported below, and a flag in cmd_report.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from np_optimizer.cli.render import heading, line, out, print_json, print_plain, print_table, warn
from np_optimizer.errors import UsageError
from np_optimizer.records import ReportRecord

__all__ = ["report_view", "get_report_view", "report_views", "print_budget_outcome"]

View = Callable[[ReportRecord], None]
_VIEWS: dict[str, View] = {}


def report_view(name: str) -> Callable[[View], View]:
    def register(function: View) -> View:
        _VIEWS[name] = function
        return function

    return register


def report_views() -> tuple[str, ...]:
    return tuple(_VIEWS)


def get_report_view(name: str) -> View:
    view = _VIEWS.get(name)
    if view is None:
        raise UsageError(f"Unknown report format '{name}'.", hint=f"Formats: {', '.join(_VIEWS)}.", code="NP-RPT-400")
    return view


@report_view("json")
def json_view(record: ReportRecord) -> None:
    print_json(record.data)


@report_view("plain")
def plain_view(record: ReportRecord) -> None:
    from np_optimizer.report.budget_table import budget_table, with_budget_column
    from np_optimizer.report.tables import header_rows, report_tables

    print_plain(["key", "value"], header_rows(record), section=record.scope)
    for index, table in enumerate(report_tables(record)):
        table = with_budget_column(table, record.budgets) if index == 0 else table
        print_plain(table.plain_columns, table.plain_rows, section=table.section)
    if record.budgets is not None:
        table = budget_table(record.budgets)
        print_plain(table.plain_columns, table.plain_rows, section=table.section)


@report_view("table")
def table_view(record: ReportRecord) -> None:
    from np_optimizer.report.budget_table import with_budget_column
    from np_optimizer.report.tables import next_step, report_tables

    first, *post_hoc = report_tables(record)
    first = with_budget_column(first, record.budgets)
    print_table(first.title, first.columns, first.rows, caption=first.caption or None)
    for note in first.footnotes:
        line("  ", (note, "dim"))
    if post_hoc:
        out.print()
        heading(f"Post-hoc Measurements ({record.post_hoc_count})")
        for table in post_hoc:
            print_table(table.title, table.columns, table.rows, caption=table.caption or None)
    for text in record.warnings:
        warn(text)
    for text in record.notices:
        line(("Note:", "cyan"), " ", text)
    hint = next_step(record)
    if hint:
        out.print(hint)


def print_budget_outcome(record: ReportRecord, junit: Path | None, *, quiet: bool = False) -> None:
    """After a checked report: the budget table and the one-line verdict (unless quiet: --json, --plain carry them),
    and the JUnit file when asked for."""
    verdict = record.budgets
    if verdict is None:
        return
    if not quiet:
        from np_optimizer.report.budget_table import budget_table

        table = budget_table(verdict)
        out.print()
        print_table(table.title, table.columns, table.rows, caption=table.caption)
        style = {"fail": "bold red", "pass": "bold green"}.get(verdict.status, "bold yellow")
        line((verdict.line, style))
    if junit is not None:
        from np_optimizer.report.junit import write_junit

        written = write_junit(junit, verdict, str(record.data.get("experiment", {}).get("name", "")))
        if not quiet:
            out.print(f"JUnit XML: {written}", soft_wrap=True)
