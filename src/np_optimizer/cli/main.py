"""Entry point: the one place where errors become messages and exit codes.

Warnings np's modules log (a corrupt job.json set aside, a damaged meta.json, a cache entry discarded) reach the
console for every command: `np run` and `np profile` show them through their run log, every other command through a
handler on the `np` logger installed here for the command's duration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from typing import TYPE_CHECKING, NoReturn

import click

from np_optimizer.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, NpError

if TYPE_CHECKING:
    import typer

__all__ = ["main"]

_RESUME = {
    "run": "Finished steps are kept (`np status` lists them); `np run --retry` resumes from the first unfinished one.",
    "profile": "Rounds that finished are kept in report.json; run `np profile` again for the others.",
    "sweep": "Finished trials are recorded; np sweep --resume continues the sweep (trials that were running run "
             "again).",
}


class _ConsoleWarnings(logging.Handler):
    """np's logged warnings as `Warning: ...` lines on stderr, unless a run log (np run, np profile) shows them."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if any(h is not self for h in logging.getLogger("np").handlers):
            return  # run_logging is active: its console handler and log file have the line
        try:
            from np_optimizer.cli.render import warn

            warn(record.getMessage())
        except Exception:  # a broken console must not break the command
            self.handleError(record)


def _interrupted(args: list[str]) -> int:
    from np_optimizer.cli.render import err

    command = next((a for a in args if not a.startswith("-")), "")
    err.print(f"Interrupted. {_RESUME.get(command, 'Results written so far are kept.')}", soft_wrap=True)
    return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Run np with `argv` (default sys.argv[1:]) and return the exit code; never raises for user errors."""
    from np_optimizer.cli.app import app
    from np_optimizer.logs import set_debug

    args = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in args
    debug = "--debug" in args or os.environ.get("NP_DEBUG") == "1"
    damaged = sys.modules.get("np_optimizer.workspace.damaged")
    if damaged is not None:  # each command says each damaged file once (not imported yet: none said)
        damaged.reset_warnings()
    set_debug(debug)  # tracebacks of internal errors logged during the command reach the console only with --debug
    warnings_handler = _ConsoleWarnings()
    np_logger = logging.getLogger("np")
    np_logger.addHandler(warnings_handler)
    try:
        return _run(app, args, json_mode=json_mode, debug=debug)
    finally:
        np_logger.removeHandler(warnings_handler)


def _print_error(error: NpError, *, json_mode: bool) -> None:
    from np_optimizer.cli.render import print_error  # (rich's console: `np --version` prints without it)

    print_error(error, json_mode=json_mode)


def _run(app: typer.Typer, args: list[str], *, json_mode: bool, debug: bool) -> int:
    try:
        result = app(args=args, prog_name="np", standalone_mode=False)
        if result == EXIT_INTERRUPTED:  # typer turns Ctrl+C into Exit(130) and returns its code
            return _interrupted(args)
        return int(result or 0)
    except NpError as error:
        if debug:
            traceback.print_exc()
        _print_error(error, json_mode=json_mode)
        return error.exit_code
    except click.exceptions.Exit as exc:
        return _interrupted(args) if exc.exit_code == EXIT_INTERRUPTED else int(exc.exit_code)
    except click.exceptions.Abort:
        return _interrupted(args)
    except click.ClickException as exc:
        if json_mode:
            _print_error(NpError(exc.format_message(), hint="See `np --help`.", code="NP-USE-400"), json_mode=True)
        else:
            exc.show()
        return EXIT_USAGE if isinstance(exc, click.UsageError) else EXIT_FAILED
    except KeyboardInterrupt:
        return _interrupted(args)
    except Exception as exc:  # a bug: say so briefly, with the traceback only under --debug
        if debug:
            traceback.print_exc()
        internal = NpError(f"Internal error: {type(exc).__name__}: {exc}",
                           hint="Rerun with --debug for the traceback, and report it.", code="NP-GEN-500")
        _print_error(internal, json_mode=json_mode)
        return EXIT_FAILED


def entry() -> None:
    _exit(main())


def _exit(code: int) -> NoReturn:
    """End the process as sys.exit would, less the interpreter's teardown: after np run its heap holds millions of
    objects (the programs, their graphs and provenance records) and torch's modules, and freeing them one by one took
    1 to 2 s after the last line was printed. What an exit must do still happens: the atexit handlers (the warm
    measuring process stopped, temporary folders removed, logging flushed) and the console streams flushed. A thread
    still running (not a daemon) is waited for as usual."""
    import atexit
    import threading

    if any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
