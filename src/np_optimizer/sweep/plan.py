"""What `np sweep` will do, before it does it: the sweep file, the trials (each run.yaml checked against the device
and model like `np validate` does), the budget, and the pool's size (`np sweep --dry-run` prints it)."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.config.detail_config import validate_detail
from np_optimizer.config.run_config import validate_run
from np_optimizer.config.sweep import SWEEP_FILE, SweepConfig, load_sweep
from np_optimizer.config.sweep_space import detail_for
from np_optimizer.devices import default_method, get_device
from np_optimizer.records.sweep import PlannedTrial, SweepPlan
from np_optimizer.sweep.driver import base_experiment, base_run
from np_optimizer.sweep.pool import default_workers
from np_optimizer.sweep.study import SweepStudy
from np_optimizer.workspace import Project
from np_optimizer.workspace.remote import remote_for
from np_optimizer.workspace.sweep_files import sweep_dir

__all__ = ["PlannedTrial", "SweepPlan", "plan_sweep", "plan_of", "sweep_file_of"]


def sweep_file_of(project: Project, file: Path | None) -> Path:
    return (file if file is not None else project.root / SWEEP_FILE).resolve()


def measures_here(project: Project, sweep: SweepConfig) -> bool:
    device = get_device(project.device_name)
    first = base_experiment(project, sweep)
    method = sweep.method or default_method(device, remote_configured=remote_for(first, device.name) is not None)
    support = device.method(method)
    return sweep.measure_on is not None and get_device(sweep.measure_on).local or (
        device.local and support is not None and support.result_kind == "measured")


def workers_for(project: Project, sweep: SweepConfig, asked: int | None) -> tuple[int, str]:
    on_host = measures_here(project, sweep)
    if asked is not None:
        why = "--workers"
        if asked > 1 and on_host:
            why += "; trials measure on this machine, so a measurement may share the CPU with another trial's compile"
        return asked, why
    return default_workers(on_host)


def plan_sweep(project: Project, file: Path | None = None, workers: int | None = None) -> SweepPlan:
    path = sweep_file_of(project, file)
    return plan_of(project, path, load_sweep(path), workers)


def plan_of(project: Project, path: Path, sweep: SweepConfig, workers: int | None = None) -> SweepPlan:
    """The plan of `sweep` (loaded from `path`): every trial's run.yaml checked, the pool's size and why."""
    device = get_device(project.device_name)
    first = base_experiment(project, sweep)
    base = base_run(project, sweep)
    study = SweepStudy(sweep, base, sweep_dir(project.root))
    trials = []
    runs = study.grid
    if sweep.strategy.name == "mixed":  # the mixed points are planned from the first trial: its two uniform ones here
        from np_optimizer.sweep.mixed import uniform_points

        runs = [(p.params, study.mixed_run(p)) for p in uniform_points(sweep.strategy)]
    for params, run in runs:
        config, issues = validate_run(run, device, model=project.info["model"])
        detail = detail_for(sweep, run, params)
        if config is not None and detail is not None:
            issues += validate_detail(detail, config)[1]
        steps = tuple(next(iter(s)) for s in run.get("steps") or [] if isinstance(s, dict) and s)
        trials.append(PlannedTrial(params, steps, tuple(i.message for i in issues if not i.is_warning)))
    count, why = workers_for(project, sweep, workers)
    method = sweep.method or default_method(device, remote_configured=remote_for(first, device.name) is not None)
    return SweepPlan(project.name, str(path), first.name, sweep.strategy.name, study.budget(), len(study.grid),
                     method, sweep.measure_on, tuple(f"{o.name}: {'max' if o.maximize else 'min'}"
                                                     for o in sweep.objectives),
                     tuple(c.text for c in sweep.constraints), count, why, measures_here(project, sweep),
                     tuple(trials),
                     tuple(i.message for i in sweep.warnings))
