"""`np run --check`'s result: the run and, when it succeeded, its checked report (apart from records/report.py, so
that np report does not load the run's records)."""

from __future__ import annotations

from dataclasses import dataclass

from np_optimizer.records.base import Record
from np_optimizer.records.commands import RunSummary
from np_optimizer.records.report import ReportRecord

__all__ = ["CheckedRun"]


@dataclass(frozen=True, eq=False, repr=False)
class CheckedRun(Record):
    """`np run --check`: the run, then its budgets checked on the stored results (`report`: the checked report; None
    when the run failed, which leaves nothing to check)."""

    summary: RunSummary
    report: ReportRecord | None = None

    @property
    def exit_code(self) -> int:
        """The budgets' (6 when one failed) after a run that succeeded; else the run's (4: unreachable, else 1)."""
        return self.report.exit_code if self.report is not None else self.summary.exit_code
