"""Console output shared by the commands: tables, JSON, TSV, errors, notices."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from np_optimizer.errors import NpError

__all__ = ["out", "err", "print_json", "print_table", "print_plain", "print_error", "notice", "warn", "OutputMode"]

def _console(stderr: bool) -> Console:
    # Pipes and CI logs get a wide fixed width instead of rich's 80 columns, so tables keep one row per line.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160
    return Console(stderr=stderr, highlight=False, width=width)


out = _console(False)
err = _console(True)


class OutputMode:
    """How a command prints: rich tables (default), `--json`, or `--plain` TSV."""

    def __init__(self, json_mode: bool = False, plain: bool = False) -> None:
        self.json = json_mode
        self.plain = plain

    @property
    def human(self) -> bool:
        return not (self.json or self.plain)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str | None = None) -> None:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    out.print(table)


def print_plain(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, section: str | None = None) -> None:
    if section:
        sys.stdout.write(f"section:{section}\n")
    sys.stdout.write("\t".join(columns) + "\n")
    for row in rows:
        sys.stdout.write("\t".join("" if v is None else str(v) for v in row) + "\n")


def print_error(error: NpError, *, json_mode: bool) -> None:
    if json_mode:
        data = error.to_dict()
        data["exit_code"] = error.exit_code
        print_json(data)
        return
    err.print(f"[bold red]Error[/] [dim]\\[{error.code}][/] {error.message}", markup=True)
    if error.hint:
        err.print(f"[yellow]Hint:[/] {error.hint}", markup=True)


def notice(message: str) -> None:
    err.print(f"[cyan]Note:[/] {message}", markup=True, soft_wrap=True)


def warn(message: str) -> None:
    err.print(f"[yellow]Warning:[/] {message}", markup=True, soft_wrap=True)
