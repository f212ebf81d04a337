"""API: np profile (post-hoc rounds on any catalogue device, recorded in report.json and job.json)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.config.checkpoints import OUTPUT_MODEL, canonical_checkpoint, checkpoint_names
from np_optimizer.config.detail_config import PROFILE_OPTIONS, TOOL_OPTIONS
from np_optimizer.config.options import Opt, merge_defaults
from np_optimizer.devices import default_method, find_device, get_device, method_support
from np_optimizer.errors import NotFoundError, NpError, UsageError
from np_optimizer.models.source import sha256_file
from np_optimizer.processes import Watch, fewer_collections
from np_optimizer.records import CheckpointRef, JobRecord, ProfileResult, ProfileRound
from np_optimizer.records.compiled import ProgramStats
from np_optimizer.workspace import Experiment, resolve_experiment
from np_optimizer.workspace.store import ExperimentStore

if TYPE_CHECKING:
    from np_optimizer.config import ExperimentConfig

__all__ = ["ProfileRound", "profile", "parse_profile_opts"]


def parse_profile_opts(items: list[str]) -> dict[str, int | float]:
    """`--profile-opt KEY=VALUE` (repeatable, or comma-separated): run.detail.yaml's profile[N] options."""
    out: dict[str, int | float] = {}
    for item in [p for raw in items for p in raw.split(",") if p.strip()]:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"Invalid --profile-opt '{item}': missing '='.", hint="Use KEY=VALUE, e.g. "
                             "--profile-opt num_executions=50.", code="NP-CPF-422")
        spec = PROFILE_OPTIONS.get(key)
        if not isinstance(spec, Opt):
            raise UsageError(f"Unknown --profile-opt key '{key}'.", hint=f"Keys: {', '.join(PROFILE_OPTIONS)}.",
                             code="NP-CPF-422")
        if key in out:
            raise UsageError(f"--profile-opt key '{key}' is given twice.", hint="Give each key once.", code="NP-CPF-422")
        try:
            value: int | float = int(text) if spec.kind == "int" else float(text)
        except ValueError:
            raise UsageError(f"--profile-opt {key}={text}: {key} must be {'an integer' if spec.kind == 'int' else 'a number'}.",
                             hint=spec.doc, code="NP-CPF-422") from None
        problem = spec.problem(value)
        if problem:
            raise UsageError(f"--profile-opt {key}={text}: {key} {problem}.", hint=spec.doc, code="NP-CPF-422")
        out[key] = value
    return out


def _finished_jobs(store: ExperimentStore) -> list[JobRecord]:
    return [j for j in store.jobs() if j.status.done and j.output]


def _targets(store: ExperimentStore, ids: list[str], output_checkpoint: Callable[[], str]) -> list[JobRecord]:
    jobs = _finished_jobs(store)
    if not jobs:
        raise NotFoundError("This experiment has no finished checkpoint to profile.",
                            hint="Run it first with `np run`.", code="NP-CPF-404")
    if not ids:
        return jobs
    by_checkpoint = {j.checkpoint: j for j in jobs}
    by_job = {j.name: j for j in jobs}
    chosen: list[JobRecord] = []
    for raw in ids:
        name = canonical_checkpoint(raw)
        if name == OUTPUT_MODEL:
            output = output_checkpoint()
            job = by_checkpoint.get(output)  # run.yaml's last step, never an earlier checkpoint in its place
            if job is None:
                raise NotFoundError(f"OUTPUT_MODEL is {output} here, which has not finished.",
                                    hint="Run the experiment (`np run --retry`), or name an earlier checkpoint.",
                                    code="NP-CPF-404")
        elif name is not None:
            job = by_checkpoint.get(name)
        else:
            job = by_job.get(raw)
        if job is None:
            available = ", ".join([*(j.checkpoint for j in jobs), *(j.name for j in jobs)])
            known = name is not None and name in checkpoint_names()
            raise NotFoundError(f"No finished checkpoint '{raw}' in this experiment" + (" (its step did not run)."
                                                                                      if known else "."),
                                hint=f"Available: {available}, OUTPUT_MODEL.", code="NP-CPF-404")
        if job not in chosen:
            chosen.append(job)
    return chosen


def _checkpoint(store: ExperimentStore, job: JobRecord) -> CheckpointRef:
    """The job's checkpoint file, checked against the sha256 its job recorded."""
    output = job.output
    path = store.job_dir(job.name) / (output.file if output else "artifacts/model.pt2")
    if not path.is_file():
        raise NotFoundError(f"The checkpoint file of {job.name} is missing ({path}).",
                            hint="Run `np run --retry` to make it again.", code="NP-CKP-404")
    if output is None or sha256_file(path) != output.sha256:
        raise NotFoundError(f"The checkpoint file of {job.name} does not match the sha256 its job recorded "
                            "(changed or corrupt).", hint="Run `np run --retry` to make it again.", code="NP-CKP-409")
    return CheckpointRef(job.checkpoint, job.name, path, output.sha256)


def _config(exp: Experiment) -> ExperimentConfig | None:
    """The experiment's validated config, loaded once per np profile; None (warned) when it is invalid now."""
    try:
        from np_optimizer.config import load_experiment_config

        return load_experiment_config(exp.run_file, get_device(exp.project.device_name))
    except NpError as exc:  # an edited, now invalid run.yaml must not block post-hoc profiling of finished checkpoints
        from np_optimizer.logs import get_logger

        get_logger("Profiler").warning(f"run.yaml / run.detail.yaml could not be read ({exc.message}); the default "
                                       "profile options apply to this round.")
        return None


def _options(config: ExperimentConfig | None, checkpoint: str,
             given: dict[str, int | float]) -> tuple[dict[str, Any], str]:
    """run.detail.yaml's profile[N] for this checkpoint when it is listed, then --profile-opt on top; and which of
    them set the time limit."""
    base = merge_defaults(PROFILE_OPTIONS, None)
    limit_from = "--profile-opt time_limit" if "time_limit" in given else \
        "the default: give --profile-opt time_limit=SECONDS"
    listed = config.run.resolved_profile() if config is not None else ()
    for index, (_listed, concrete) in enumerate(listed):
        if concrete == checkpoint and config is not None:
            base = dict(config.detail.profile_options(index))
            if "time_limit" not in given:
                limit_from = f"run.detail.yaml profile[{index}].time_limit (or --profile-opt time_limit=SECONDS)"
    return {**base, **given}, limit_from


def profile(ids: list[str] | None = None, *, experiment: str | None = None, project: str | None = None,
            method: str | None = None, device: str | None = None, runtime: str | None = None,
            backend: str | None = None, force: bool = False, profile_opts: dict[str, int | float] | None = None,
            cwd: Path | None = None, progress: Callable[[str], None] = lambda _t: None,
            console_write: Callable[[str], None] | None = None) -> ProfileRound:
    """Compile and profile finished checkpoints post hoc; every round is recorded, failed ones too.

    Log lines go to `console_write` and the experiment's logs/execution.log; library output to the log file only.
    """
    from np_optimizer.logs import quiet_native_output, run_logging

    exp = resolve_experiment(experiment, project, cwd or Path.cwd())
    from np_optimizer.workspace.run_lock import run_lock

    # Shared: np profiles run side by side (the device queue orders their measurements), never beside an np run.
    with run_lock(exp, "np profile", exclusive=False), run_logging(exp.log_file, console_write), \
            quiet_native_output(exp.log_file), fewer_collections():
        return _profile(exp, ids, method=method, device=device, runtime=runtime, backend=backend, force=force,
                        profile_opts=profile_opts, progress=progress)


def _profile(exp: Experiment, ids: list[str] | None, *, method: str | None, device: str | None, runtime: str | None,
             backend: str | None, force: bool, profile_opts: dict[str, int | float] | None,
             progress: Callable[[str], None]) -> ProfileRound:
    from np_optimizer.profiler.session import RoundRequest, failed_round, profile_checkpoint, round_base
    from np_optimizer.workspace.remote import remote_for

    target = find_device(device, runtime, backend) if device else get_device(exp.project.device_name)
    if device is None and (runtime or backend):
        target = find_device(target.name, runtime, backend)
    remote = remote_for(exp, target.name)
    chosen = method.lower() if method else default_method(target, remote_configured=remote is not None)
    support = method_support(target, chosen, remote_configured=remote is not None)
    measuring = sorted(k for k in profile_opts or {} if k not in TOOL_OPTIONS)
    if measuring and support.result_kind != "measured":
        raise UsageError(f"--profile-opt {', '.join(measuring)} applies to measured methods; {chosen} is a static "
                         "estimate.", hint="Drop it (time_limit applies to every method), or use --method on-device.",
                         code="NP-CPF-422")
    store = ExperimentStore(exp)
    store.recover()  # a writing command: damaged result files are restored from their copies before it reads them
    from np_optimizer.api.experiments import output_checkpoint

    jobs = _targets(store, list(ids or []), lambda: output_checkpoint(exp))
    results: list[ProfileResult] = []
    from np_optimizer.logs import get_logger

    log = get_logger("Profiler")
    log.info(f"Post-hoc profiling: {target.name} / {target.runtime} / {target.backend}, method {chosen}")
    seen: set[str] = set()
    config: ExperimentConfig | None = None
    config_read = False
    for index, job in enumerate(jobs, 1):
        progress(f"{job.checkpoint.lower()} ({index}/{len(jobs)}) on {target.name}")
        try:
            ref = _checkpoint(store, job)
        except NotFoundError as exc:
            base = round_base(checkpoint=job.checkpoint, job=job.name, device=target, method=chosen,
                              checkpoint_sha256=job.output.sha256 if job.output else "", requested_method=method,
                              trigger="POSTHOC")
            failed = failed_round(base, support.result_kind, exc, log)
            store.add_profile_round(failed)
            results.append(failed)
            continue
        if not config_read:  # once per command, when the first checkpoint needs it (an invalid one warned once)
            config, config_read = _config(exp), True
        options, limit_from = _options(config, job.checkpoint, profile_opts or {})
        watch = Watch(limit_s=float(options["time_limit"]), label=job.checkpoint.lower(), option=limit_from,
                      rerun=f"run `np profile {job.checkpoint}` again")
        # nothing is handed over after the fact: the job's compilation is looked up in its folder (or compiled)
        asked = RoundRequest(checkpoint=ref, job_dir=store.job_dir(job.name), experiment_root=exp.root, device=target,
                             method=chosen, options=options, trigger="POSTHOC", requested_method=method, force=force,
                             remote=remote, watch=watch, stats=ProgramStats.of_output(job.output, ref.sha256))
        outcome = profile_checkpoint(asked, progress=progress, seen=seen)
        store.add_profile_round(outcome)
        results.append(outcome)
    return ProfileRound(exp.name, target.name, chosen, tuple(results), requested_method=method)
