"""A trial worker for the local pool's own tests, no np run: its main writes the warm measuring process it was handed
($NP_MEASURE_WARM_SOCKET, empty when none) to the trial's folder as `measuring`, says one progress line, then waits
until a file `go` appears in the trial's folder and answers success. The pool runs it as it runs np's
(`main([JOB_JSON])`), and writes whether its folder was `primed` when it started; its `prime`, which the warm host
calls before its first fork and after each fork, writes the host's pid to `primed` and raises when the folder holds
`refuse` (as a trace that left a thread running does)."""

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


def main(argv: list[str]) -> int:
    job = job_of(argv[0])
    job.experiment_dir.mkdir(parents=True, exist_ok=True)
    (job.experiment_dir / "measuring").write_text(os.environ.get("NP_MEASURE_WARM_SOCKET", ""))
    (job.experiment_dir / "primed_at_start").write_text(str((job.experiment_dir / "primed").exists()))
    sys.stdout.write(progress_line("started"))
    sys.stdout.flush()
    while not (job.experiment_dir / "go").exists():
        time.sleep(0.05)
    sys.stdout.write(result_line(TrialResult(job.experiment_dir.name, "success")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
