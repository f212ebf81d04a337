"""The live display of a long command: log lines above, a one-line status with elapsed time below.

It writes through its own duplicate of the terminal's stderr, so it keeps working while np sends what the libraries
print on the process's fds 1 and 2 to the log file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.status import Status

__all__ = ["LiveDisplay", "live_display"]


class LiveDisplay:
    def __init__(self, console: Console, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet
        self._status: Status | None = None
        self._started = time.monotonic()
        self._text = "starting"

    def write(self, line: str) -> None:
        if not self.quiet:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def progress(self, text: str) -> None:
        self._text = text
        if self._status is not None:
            self._status.update(_Label(self))

    def _label(self) -> Text:
        # the progress text names checkpoints and devices: styled around, never read as markup
        return Text.assemble((self._text, "bold cyan"), "  ", (f"{time.monotonic() - self._started:.0f} s", "dim"))


class _Label:
    """The status line, rendered at every refresh of the spinner: its seconds keep counting while a long step says
    nothing new (a quantization, a lowering), instead of standing at the time of the last progress text."""

    def __init__(self, display: LiveDisplay) -> None:
        self._display = display

    def __rich__(self) -> Text:
        return self._display._label()


@contextmanager
def live_display(*, quiet: bool = False) -> Iterator[LiveDisplay]:
    stream = os.fdopen(os.dup(2), "w", buffering=1)
    console = Console(file=stream, highlight=False, markup=False, emoji=False, width=None if stream.isatty() else 160)
    display = LiveDisplay(console, quiet)
    try:
        if console.is_terminal and not quiet:
            with console.status(_Label(display), spinner="dots") as status:
                display._status = status
                yield display
        else:
            yield display
    finally:
        stream.close()
