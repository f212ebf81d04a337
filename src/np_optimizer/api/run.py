"""API: np run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from np_optimizer.logs import quiet_native_output, run_logging
from np_optimizer.processes import fewer_collections
from np_optimizer.records import RunSummary
from np_optimizer.records.checked import CheckedRun
from np_optimizer.records.status import RunStatus
from np_optimizer.runner import run_experiment
from np_optimizer.workspace import resolve_experiment

__all__ = ["run", "run_checked"]


def run(*, experiment: str | None = None, project: str | None = None, retry: bool = False,
        profile_method: str | None = None, force: bool = False, cwd: Path | None = None,
        console_write: Callable[[str], None] | None = None,
        progress: Callable[[str], None] = lambda _t: None) -> RunSummary:
    """Run the experiment's steps and profile its listed checkpoints, locally and synchronously.

    `force` computes every step again instead of taking it from the step cache (pipeline/step_cache.py), and
    estimates again instead of reusing a cached estimate of the same compiled checkpoint.
    Log lines go to `console_write` (if given) and to the experiment's logs/execution.log; what the libraries print,
    natively or through warnings, goes to the log file only.
    """
    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    from np_optimizer.config import load_experiment_config
    from np_optimizer.devices import get_device

    # Violations stop here: nothing runs and no log is started. The run uses this device and config (loaded once).
    device = get_device(exp.project.device_name)
    config = load_experiment_config(exp.run_file, device, model=exp.project.info["model"])
    from np_optimizer.workspace.run_lock import run_lock

    # One np run at a time, and no np profile beside it: a busy experiment is refused (NP-EXP-423) before any log.
    with run_lock(exp, "np run", exclusive=True), run_logging(exp.log_file, console_write), \
            quiet_native_output(exp.log_file), fewer_collections():
        return run_experiment(exp, retry=retry, profile_method=profile_method, force=force, progress=progress,
                              loaded=(device, config))


def run_checked(*, experiment: str | None = None, project: str | None = None, retry: bool = False,
                profile_method: str | None = None, force: bool = False, budgets: Sequence[str] = (),
                check_all: bool = False, cwd: Path | None = None, console_write: Callable[[str], None] | None = None,
                progress: Callable[[str], None] = lambda _t: None) -> CheckedRun:
    """np run --check: the budgets (run.yaml's `budgets:` with `budgets` overrides, KEY=VALUE) read first, so a bad
    one stops the command before anything runs; then the run; then, if it succeeded, the budgets checked on its
    results (`check_all`: on every checkpoint, not the last one only)."""
    from np_optimizer.api.report import budgets_to_check, report

    folder, _budgets = budgets_to_check(experiment=experiment, project=project, overrides=budgets, cwd=cwd)
    summary = run(experiment=experiment, project=project, retry=retry, profile_method=profile_method, force=force,
                  cwd=cwd, console_write=console_write, progress=progress)
    if summary.status != RunStatus.SUCCESS:
        return CheckedRun(summary)
    return CheckedRun(summary, report(experiment=str(folder), check=True, budgets=budgets, check_all=check_all))
