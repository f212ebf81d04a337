"""A trial worker for the local pool's own tests, no np run: its main writes the warm measuring process it was handed
($NP_MEASURE_WARM_SOCKET, empty when none) to the trial's folder as `measuring`, says one progress line, then waits
until a file `go` appears in the trial's folder and answers success. The pool runs it as it runs np's
(`main([JOB_JSON])`), and writes whether its folder was `primed` when it started; its `prime`, which the warm host
calls before its first fork and after each fork, writes the host's pid to `primed` and raises when the folder holds
`refuse` (as a trace that left a thread running does); its `rehearse`, which the host calls after its first fork,
takes as long as the test says (`rehearse`, `rehearsal_go`), and with `measure` in its folder the trial waits for the
host's rehearsal as a local measurement does, writing `measured`."""

from __future__ import annotations

import os
import sys
import time

from np_optimizer.records.sweep import TrialResult
from np_optimizer.sweep.worker import job_of, progress_line, result_line


def prime(argv: list[str]) -> None:
    job = job_of(argv[0])
    job.experiment_dir.mkdir(parents=True, exist_ok=True)
    (job.experiment_dir / "primed").write_text(str(os.getpid()))
    if (job.experiment_dir / "refuse").exists():
        raise RuntimeError("tracing the backend's patterns left 1 thread(s) running")


def rehearse(argv: list[str]) -> None:
    """With `rehearse` in the trial's folder: writes the host's pid to `rehearsing`, waits for `rehearsal_go`, then
    writes `rehearsed` (a rehearsal that takes as long as the test wants)."""
    job = job_of(argv[0])
    if not (job.experiment_dir / "rehearse").exists():
        return
    (job.experiment_dir / "rehearsing").write_text(str(os.getpid()))
    while not (job.experiment_dir / "rehearsal_go").exists():
        time.sleep(0.05)
    (job.experiment_dir / "rehearsed").write_text("1")


def main(argv: list[str]) -> int:
    job = job_of(argv[0])
    job.experiment_dir.mkdir(parents=True, exist_ok=True)
    (job.experiment_dir / "measuring").write_text(os.environ.get("NP_MEASURE_WARM_SOCKET", ""))
    (job.experiment_dir / "primed_at_start").write_text(str((job.experiment_dir / "primed").exists()))
    sys.stdout.write(progress_line("started"))
    sys.stdout.flush()
    if (job.experiment_dir / "measure").exists():  # as a local measurement does first: wait while the host is busy
        from np_optimizer.busy import wait_while_busy

        wait_while_busy()
        (job.experiment_dir / "measured").write_text(str((job.experiment_dir / "rehearsed").exists()))
    while not (job.experiment_dir / "go").exists():
        time.sleep(0.05)
    sys.stdout.write(result_line(TrialResult(job.experiment_dir.name, "success")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
