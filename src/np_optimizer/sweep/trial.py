"""One trial: the experiment's run, to its end, reported as JSON-able events. The local pool runs it in a child
process (`python -m np_optimizer.sweep.trial EXPERIMENT_DIR`), a Ray task runs it in the task's process."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.errors import ValidationFailed, error_record
from np_optimizer.records.codec import to_dict
from np_optimizer.records.parts import ErrorRecord
from np_optimizer.records.status import RoundStatus, RunStatus

__all__ = ["run_trial", "main"]

Emit = Callable[[dict[str, Any]], None]


def measuring_method(device_name: str) -> str:
    """The device's method that measures (np profile -d DEVICE --method it)."""
    from np_optimizer.devices import get_device

    device = get_device(device_name)
    return next((m.method for m in device.methods if m.result_kind == "measured"), device.methods[0].method)


def run_trial(experiment_dir: Path, *, method: str | None, retry: bool, measure_on: str | None,
              emit: Emit, measure_only: bool = False) -> dict[str, Any]:
    """Run the experiment (np run), then with `measure_on` measure its last checkpoint on that device (np profile
    OUTPUT_MODEL -d DEVICE), and return the `done` event: status success|failed, duration, the error that stopped it.
    `measure_only` skips the run (its steps ran elsewhere: a Ray node) and only measures here.
    """
    from np_optimizer import api

    started = time.monotonic()
    try:
        error: ErrorRecord | None = None
        if not measure_only:
            summary = api.run(experiment=str(experiment_dir), retry=retry, profile_method=method,
                              progress=lambda text: emit({"event": "progress", "text": text}))
            error = summary.error
            if error is None and summary.status != RunStatus.SUCCESS:
                failed = [p for p in summary.profile if p.status != RoundStatus.SUCCESS]
                error = failed[0].error if failed and failed[0].error else ErrorRecord.with_message("a profiling round failed")
        if error is None and measure_on:
            emit({"event": "progress", "text": f"measuring on {measure_on}"})
            measured = api.profile(["OUTPUT_MODEL"], experiment=str(experiment_dir), device=measure_on,
                                   method=measuring_method(measure_on))
            failed_rounds = [r for r in measured.results if r.status != RoundStatus.SUCCESS]
            if failed_rounds:
                error = failed_rounds[0].error or ErrorRecord.with_message(f"the measurement on {measure_on} failed")
        done: dict[str, Any] = {"event": "done", "status": RunStatus.FAILED if error else RunStatus.SUCCESS,
                                "error": to_dict(error) if error else None}
    except ValidationFailed as exc:  # the trial's run.yaml breaks a rule of the device or model: say which
        errors = [i for i in exc.issues if not i.is_warning]
        first = errors[0] if errors else None
        done = {"event": "done", "status": "failed", "error": {
            "code": exc.code, "message": f"run.yaml: {first.message}" if first else exc.message,
            "hint": first.hint if first else exc.hint}}
    except Exception as exc:  # noqa: BLE001 - any failure is the trial's, recorded with its reason; the sweep goes on
        done = {"event": "done", "status": "failed", "error": error_record(exc)}
    done["duration_s"] = round(time.monotonic() - started, 3)
    return done


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    method = None
    if "--method" in args:
        at = args.index("--method")
        method = args[at + 1]
        del args[at:at + 2]
    measure_on = None
    if "--measure-on" in args:
        at = args.index("--measure-on")
        measure_on = args[at + 1]
        del args[at:at + 2]
    retry, measure_only = "--retry" in args, "--measure-only" in args
    args = [a for a in args if a not in ("--retry", "--measure-only")]
    # the run sends the libraries' output to its log by fd; the events keep their own copy of stdout
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")

    def emit(event: dict[str, Any]) -> None:
        events.write(json.dumps(event, default=str) + "\n")
        events.flush()

    emit(run_trial(Path(args[0]).resolve(), method=method, retry=retry, measure_on=measure_on, emit=emit,
                   measure_only=measure_only))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
