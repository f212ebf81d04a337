"""Entry point: the one place where errors become messages and exit codes."""

from __future__ import annotations

import os
import sys
import traceback

import click

from np_optimizer.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, NpError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run np with `argv` (default sys.argv[1:]) and return the exit code; never raises for user errors."""
    from np_optimizer.cli.app import app
    from np_optimizer.cli.render import err, print_error
    from np_optimizer.logs import set_debug

    args = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in args
    debug = "--debug" in args or os.environ.get("NP_DEBUG") == "1"
    set_debug(debug)  # tracebacks of internal errors logged during the command reach the console only with --debug
    try:
        result = app(args=args, prog_name="np", standalone_mode=False)
        return int(result or 0)
    except NpError as error:
        if debug:
            traceback.print_exc()
        print_error(error, json_mode=json_mode)
        return error.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        err.print("Interrupted.")
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        if json_mode:
            print_error(NpError(exc.format_message(), hint="See `np --help`.", code="NP-USE-400"), json_mode=True)
        else:
            exc.show()
        return EXIT_USAGE if isinstance(exc, click.UsageError) else EXIT_FAILED
    except KeyboardInterrupt:
        err.print("Interrupted; results written so far are kept. `np run --retry` resumes a run.")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so briefly, with the traceback only under --debug
        if debug:
            traceback.print_exc()
        internal = NpError(f"Internal error: {type(exc).__name__}: {exc}",
                           hint="Rerun with --debug for the traceback, and report it.", code="NP-GEN-500")
        print_error(internal, json_mode=json_mode)
        return EXIT_FAILED


def entry() -> None:
    sys.exit(main())
