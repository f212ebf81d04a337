"""Console output shared by the commands: tables, JSON, TSV, errors, notices.

User text is never read as rich markup: both consoles are made with `markup=False` and `emoji=False`, every table
cell, title and caption is a `rich.text.Text`, and np's own styling is applied around the text as `Text` spans
(`line(("Error", "bold red"), " ", message)`). So `[/x]` in a flag, or `[batch]` in a message, prints as written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Union

from rich.console import Console
from rich.table import Table
from rich.text import Text

from np_optimizer.errors import NpError, ValidationFailed

__all__ = ["out", "err", "Part", "styled", "line", "heading", "print_json", "print_table", "print_plain",
           "print_error", "notice", "warn"]

# A piece of a line: plain text, or (text, rich style) for np's own styling around it.
Part = Union[str, tuple[str, str]]


def _console(stderr: bool) -> Console:
    # Pipes and CI logs get a wide fixed width instead of rich's 80 columns, so tables keep one row per line.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160
    return Console(stderr=stderr, highlight=False, markup=False, emoji=False, width=width)


out = _console(False)
err = _console(True)


def styled(*parts: Part) -> Text:
    """One Text from plain pieces and (text, style) pieces; no piece is parsed as markup."""
    return Text.assemble(*parts)


def line(*parts: Part, stderr: bool = False) -> None:
    """Print one line made of plain and styled pieces."""
    (err if stderr else out).print(styled(*parts), soft_wrap=True)


def heading(text: str) -> None:
    line((text, "bold"))


def _text(value: Any) -> Text:
    return value if isinstance(value, Text) else Text("-" if value is None else str(value))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str | None = None) -> None:
    table = Table(title=Text(title), title_justify="left", caption=Text(caption) if caption else None,
                  caption_justify="left")
    for column in columns:
        table.add_column(Text(column), overflow="fold")
    for row in rows:
        table.add_row(*(_text(v) for v in row))
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
    if isinstance(error, ValidationFailed):  # its hint points at "the violations listed above": list them
        for issue in error.issues:
            style = "yellow" if issue.is_warning else "red"
            line((f"{issue.where}", "bold"), " ", (issue.code, style), " ", issue.message, stderr=True)
            if issue.hint:
                line("    ", ("Hint:", "yellow"), " ", issue.hint, stderr=True)
    line(("Error", "bold red"), " ", (f"[{error.code}]", "dim"), " ", error.message, stderr=True)
    if error.hint:
        line(("Hint:", "yellow"), " ", error.hint, stderr=True)


def failures(items: Sequence[tuple[str, str, str | None]], *, stderr: bool = False) -> None:
    """Failed rounds, one `name: message` line each, then each distinct hint once (what to do about one unreachable
    device is said once for every round it failed)."""
    hints: dict[str, None] = {}
    for name, message, hint in items:
        line("  ", (f"{name}:", "red"), " ", message, stderr=stderr)
        if hint:
            hints[hint] = None
    for hint in hints:
        line("  ", ("Hint:", "yellow"), " ", hint, stderr=stderr)


def notice(message: str) -> None:
    line(("Note:", "cyan"), " ", message, stderr=True)


def warn(message: str) -> None:
    line(("Warning:", "yellow"), " ", message, stderr=True)
