"""Budget outcomes as report tables: the pass/fail column added to the pipeline table, and the detail table."""

from __future__ import annotations

import dataclasses

from np_optimizer.records.report import Table
from np_optimizer.report.budgets import FAIL, NOT_CHECKED, PASS, BudgetVerdict

__all__ = ["with_budget_column", "budget_table"]


def _row_status(verdict: BudgetVerdict, model: str) -> str:
    mine = [o for o in verdict.outcomes if o.model == model]
    if not mine:
        return ""  # not a checked checkpoint
    if any(o.status == FAIL for o in mine):
        return "FAIL (" + ", ".join(o.budget for o in mine if o.status == FAIL) + ")"
    if any(o.status == PASS for o in mine):
        skipped = sum(o.status == NOT_CHECKED for o in mine)
        return "pass" + (f" ({skipped} not checked)" if skipped else "")
    return "not checked"


def with_budget_column(table: Table, verdict: BudgetVerdict | None) -> Table:
    """The pipeline table with a `Budgets` column (pass, FAIL (metric...), not checked; empty for rows not checked)."""
    if verdict is None:
        return table
    statuses = [_row_status(verdict, str(plain[0])) for plain in table.plain_rows]
    return dataclasses.replace(
        table, columns=[*table.columns, "Budgets"], rows=[[*r, s or "-"] for r, s in zip(table.rows, statuses)],
        plain_columns=[*table.plain_columns, "budgets"],
        plain_rows=[[*r, s] for r, s in zip(table.plain_rows, statuses)])


def budget_table(verdict: BudgetVerdict) -> Table:
    """One row per (checkpoint, budget): limit, value, how the value was obtained, and the outcome or the reason."""
    rows, plain = [], []
    for o in verdict.outcomes:
        limit = f"{'>=' if o.minimum else '<='} {o.limit:g} {o.unit}"
        value = "-" if o.value is None else ("identical" if o.value == float("inf") else f"{o.value:.4g} {o.unit}")
        result = o.status if o.status != FAIL else "FAIL"
        rows.append([o.model, o.budget, limit, value, o.value_kind or "-", result if o.status != NOT_CHECKED
                     else f"not checked: {o.reason}"])
        plain.append([o.model, o.budget, o.limit, o.kind_of_limit, "" if o.value is None else o.value,
                      o.value_kind, o.status, o.reason or "", o.source, o.origin])
    return Table("Budgets", ["Model", "Budget", "Limit", "Value", "Obtained", "Result"], rows,
                 ["model", "budget", "limit", "limit_kind", "value", "value_kind", "status", "reason", "source",
                  "origin"], plain, caption="Values from the project's device: measured if available, else estimated.",
                 section="budgets")
