"""Views of `np report`: one registered function per output format, printing a ReportRecord.

    @report_view("plain")
    def plain(record: ReportRecord) -> None: ...

`np report` picks the view from its flags (--json, --plain, else the table); a new format (HTML, say) is one
decorated function here or in a module imported below, and a flag in cmd_report.py.
"""

from __future__ import annotations

from collections.abc import Callable

from np_optimizer.cli.render import heading, line, out, print_json, print_plain, print_table, warn
from np_optimizer.errors import UsageError
from np_optimizer.records import ReportRecord

__all__ = ["report_view", "get_report_view", "report_views"]

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
    from np_optimizer.report.tables import header_rows, report_tables

    print_plain(["key", "value"], header_rows(record), section=record.scope)
    for table in report_tables(record):
        print_plain(table.plain_columns, table.plain_rows, section=table.section)


@report_view("table")
def table_view(record: ReportRecord) -> None:
    from np_optimizer.report.tables import next_step, report_tables

    first, *post_hoc = report_tables(record)
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
