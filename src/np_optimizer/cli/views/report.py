"""Renderers of `np report`'s ReportRecord: table, json, plain (stdout), html and junit (files); and the budget
outcome printed after a checked report."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.cli.render import heading, line, out, print_json, print_plain, print_table, warn
from np_optimizer.cli.views.base import renderer
from np_optimizer.errors import UsageError
from np_optimizer.records import ReportRecord, Table
from np_optimizer.records.codec import as_object
from np_optimizer.records.status import BudgetStatus

__all__ = ["print_budget_outcome"]


@renderer("report", "json")
def json_view(record: ReportRecord, _target: Path | None) -> None:
    print_json(record.data)


@renderer("report", "plain")
def plain_view(record: ReportRecord, _target: Path | None) -> None:
    from np_optimizer.report.budget_table import budget_table, with_budget_column
    from np_optimizer.report.tables import header_rows, report_tables

    print_plain(["key", "value"], header_rows(record), section=record.scope)
    for index, table in enumerate(report_tables(record)):
        table = with_budget_column(table, record.budgets) if index == 0 else table
        print_plain(table.plain_columns, table.plain_rows, section=table.section)
    if record.budgets is not None:
        table = budget_table(record.budgets)
        print_plain(table.plain_columns, table.plain_rows, section=table.section)
    if record.project is not None and record.project.sweep_warning is not None:  # trials.json cannot be read
        print_plain(["warning"], [[record.project.sweep_warning]], section="sweep")


@renderer("report", "table")
def table_view(record: ReportRecord, _target: Path | None) -> None:
    from np_optimizer.report.budget_table import with_budget_column
    from np_optimizer.report.tables import next_step, report_tables

    tables = report_tables(record)
    first, *post_hoc = tables if record.project is None else tables[:1]  # a project's others: its sweep's front
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
    if record.project is not None:
        _sweep_view(tables[1:], record.project.sweep_warning)


def _sweep_view(tables: list[Table], warning: str | None) -> None:
    """The project's sweep: its trials with the front marked, the best trial per objective and the failed trials'
    reasons (report/front.py); or the one-line warning of a trials.json that cannot be read."""
    for table in tables:
        out.print()
        print_table(table.title, table.columns, table.rows, caption=table.caption or None)
        for note in table.footnotes:
            line("  ", note)
    if warning is not None:
        warn(warning)


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
        style = {BudgetStatus.FAIL: "bold red", BudgetStatus.PASS: "bold green"}.get(verdict.status, "bold yellow")
        line((verdict.line, style))
    if junit is not None:
        written = junit_file(record, junit)
        if not quiet:
            out.print(f"JUnit XML: {written}", soft_wrap=True)


@renderer("report", "html")
def html_file(record: ReportRecord, target: Path | None) -> Path:
    """One self-contained page (default report.html in the experiment or project folder)."""
    from np_optimizer.api.report import write_html_report

    return write_html_report(record, target)


@renderer("report", "junit")
def junit_file(record: ReportRecord, target: Path | None) -> Path:
    """The checked budgets as JUnit XML (one test case per checkpoint and budget)."""
    from np_optimizer.report.junit import write_junit

    if record.budgets is None or target is None:
        raise UsageError("JUnit output needs checked budgets and a file.", hint="np report --check --junit FILE.",
                         code="NP-RPT-400")
    return write_junit(target, record.budgets, str(as_object(record.data.get("experiment")).get("name", "")))
