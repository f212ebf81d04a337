"""Measure an ExecuTorch .pte on this machine and print ONE JSON document on stdout.

    python3 measure_pte.pyz model.pte [--warmup 3] [--runs 30] [--timeout 60] [--threads N]
        [--method forward] [--input-spec 1x3x224x224:float32,1x10:int64] [--seed 0]
        [--inputs inputs.pt|inputs.npy|inputs.npz] [--no-guard]

(`python3 -m measure_pte ...` with the archive on sys.path, or `python -m np_optimizer.profiler.measure.measure_pte`
inside np, run the same code.)

The timeout bounds the measurement only (warm-up + timed runs), not the imports or the load. When it expires the
runs done so far are returned with "partial": true.

Process layout (default): a small supervisor process (supervisor.py) starts a worker process (this same code with
--_worker). The worker imports torch and the runtime, loads, runs, and sends events (JSON lines, flushed at most
every 0.5 s so the supervisor wakes up rarely) to the supervisor. --no-guard runs everything in one process.
Inside np on this machine, --zygote SOCKET has the worker forked from np's warm measuring process (zygote.py)
instead, saving the imports.

Exit codes: 0 ok (also partial), 2 usage, 3 file not found, 4 runtime missing (no torch/executorch in this Python),
5 load failed (invalid .pte, backend not registered, method missing), 6 input error, 7 execute failed, 8 hung (an
execute call or the load did not return), 9 worker crashed, 10 internal error, 11 interrupted (SIGINT/SIGTERM/SIGHUP,
or the process that started this one is gone, before any sample; after some samples the result comes back as
partial). On error stdout holds {"ok": false, "error": {"kind", "message", ...}, ...}.

The measuring processes die with the process that started them (parent.py): a killed np leaves nothing running.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional, Sequence

from .options import WORKER_FLAG, parse_options
from .protocol import EXIT, SCHEMA, MeasureError, error_dict, now_stamp, print_doc
from .supervisor import main_supervisor
from .worker import main_direct, main_worker
from .zygote import ZYGOTE_FLAG, main_zygote


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the arguments and run the chosen process layout; returns the exit code (the document is printed)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [ZYGOTE_FLAG] and len(args) == 2:
        return main_zygote(args[1])
    started = now_stamp()
    try:
        options = parse_options(args)
    except MeasureError as e:
        doc = {"schema": SCHEMA, "ok": False, "error": error_dict(e),
               "timestamps": {"start": started, "end": now_stamp()}, "exit_code": EXIT["usage"]}
        print_doc(doc, sys.stdout)
        return EXIT["usage"]
    if options.worker:
        return main_worker(options)
    if options.no_guard:
        return main_direct(options)
    return main_supervisor(options, [a for a in args if a != WORKER_FLAG])


def run() -> NoReturn:
    """The zipapp's entry point (zipapp's generated __main__.py ignores a return value)."""
    code = main()
    if sys.argv[1:2] == [ZYGOTE_FLAG]:  # np waits for its warm process to end: skip tearing torch down (about
        sys.stdout.flush()               # 0.5 s); it has no file of its own to flush, its socket is removed
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
