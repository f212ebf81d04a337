"""np run's Profiling phase: each checkpoint listed under `profile:`, in list order, compiled and profiled by
np_optimizer.profiler; results to report.json and job.json."""

from __future__ import annotations

from collections.abc import Callable

from np_optimizer.compile import Watch
from np_optimizer.errors import NpError
from np_optimizer.logs import get_logger, phase_banner
from np_optimizer.pipeline.context import RunContext
from np_optimizer.profiler.session import failed_round, profile_checkpoint, round_base
from np_optimizer.records import CheckpointRef, Plan, ProfileResult
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["profile_run"]


def profile_run(run: RunContext, store: ExperimentStore, plan: Plan, produced: dict[str, CheckpointRef], *,
                phase: int, progress: Callable[[str], None], requested_method: str | None = None,
                force: bool = False) -> list[ProfileResult]:
    """The Profiling phase of np run: each listed checkpoint in list order, results to report.json and job.json."""
    log = get_logger("Profiler")
    device = run.device
    phase_banner(log, phase, "Profiling")
    log.info(f"Target: {device.name} / {device.runtime} / {device.backend}")
    if plan.profile is None:
        return []
    store.start_profiling([p.listed_as for p in plan.profile], method=plan.profile[0].method if plan.profile else None)
    from np_optimizer.workspace.remote import remote_for

    remote = remote_for(run.experiment, device.name)
    results = []
    seen: set[str] = set()
    for index, planned in enumerate(plan.profile):
        ref = produced.get(planned.checkpoint)
        progress(f"profiling {planned.checkpoint.lower()} ({index + 1}/{len(plan.profile)})")
        if ref is None:
            base = round_base(checkpoint=planned.checkpoint, job=planned.job, checkpoint_sha256="", device=device,
                              method=planned.method, requested_method=requested_method, trigger="RUN_INLINE")
            missing = NpError(f"{planned.listed_as} was not produced because its step did not finish.",
                              hint="Fix the failed step, then `np run --retry`.", code="NP-PRF-409")
            result = failed_round(base, planned.result_kind, missing, log)
        else:
            options = run.config.detail.profile_options(index)
            watch = Watch(limit_s=float(options["time_limit"]), label=planned.checkpoint.lower(),
                          option=f"run.detail.yaml profile[{index}].time_limit", rerun="run `np run --retry` (the "
                          f"finished steps are reused) or `np profile {planned.checkpoint}`")
            result = profile_checkpoint(
                checkpoint=ref, job_dir=store.job_dir(ref.job), experiment_root=run.experiment.root, device=device,
                method=planned.method, requested_method=requested_method, options=options,
                trigger="RUN_INLINE", force=force, log_file=run.log_file, remote=remote, progress=progress,
                seen=seen, watch=watch)
        store.add_profile_round(result)
        results.append(result)
    log.info("Profiling complete. Results saved to report.json")
    return results
