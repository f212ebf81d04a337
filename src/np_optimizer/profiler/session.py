"""The compile -> profile sequence for one checkpoint, and the Profiling phase of np run."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from np_optimizer.compile import (
    CompiledCheckpoint,
    Watch,
    compile_dir,
    compile_for,
    find_compiled,
    reuse_note,
    stopped_compile,
    stopped_under,
)
from np_optimizer.devices import Device
from np_optimizer.errors import CompileError, NpError
from np_optimizer.files import write_text
from np_optimizer.layers.graph import GRAPH_FILE
from np_optimizer.layers.reasons import compiled_summary
from np_optimizer.logs import get_logger
from np_optimizer.models.source import sha256_file
from np_optimizer.profiler.cache import EstimateCache, cache_key
from np_optimizer.profiler.methods import get_method
from np_optimizer.profiler.render import metric_lines
from np_optimizer.profiler.request import MethodOutput, ProfileRequest, RoundRequest
from np_optimizer.records import MetricValue, ProfileResult, from_dict
from np_optimizer.records.parts import CompileSummary, ErrorRecord, RoundCache
from np_optimizer.records.status import CompileStatus, RoundStatus
from np_optimizer.versions import np_version, tool_version
from np_optimizer.workspace import utc_now

__all__ = ["RoundRequest", "profile_checkpoint", "measurement_id", "round_base", "failed_round"]


def measurement_id() -> str:
    return f"m{time.strftime('%Y%m%d%H%M%S')}{secrets.token_hex(3)}"


def _compiled_for(request: RoundRequest, progress: Callable[[str], None],
                  watch: Watch) -> tuple[CompiledCheckpoint, float, bool]:
    """(the compilation the round profiles, seconds spent compiling, whether it was made before the round).

    np run hands over what its job compiled: profiled as is, unless it failed in a way a new try could mend (a crash,
    or a shorter time limit than this round's). With nothing handed over (np profile, a job reused under --retry):
    an intact earlier compilation in the job folder, one the same time limit stopped before (not waited for twice:
    its round fails with that reason), or a new one.
    """
    from np_optimizer.files import file_lock

    checkpoint, device, handed = request.checkpoint, request.device, request.compiled
    out_dir = compile_dir(request.job_dir, device)
    if handed is not None and handed.folder == out_dir and (
            handed.record.status != CompileStatus.FAILED or stopped_under(handed.record, watch.limit_s)):
        return handed, 0.0, True
    with file_lock(out_dir):  # another np process may be compiling, or measuring, the same folder
        found = None if handed is not None else (find_compiled(out_dir, device, checkpoint.sha256)
                                                 or stopped_compile(out_dir, device, checkpoint.sha256, watch.limit_s))
        if found is not None:
            return CompiledCheckpoint(checkpoint, out_dir, found, request.stats), 0.0, True
        progress(f"compiling {checkpoint.name.lower()} for {device.name}")
        start = time.perf_counter()
        compiled = compile_for(checkpoint, device, request.job_dir, stats=request.stats,
                               watch=replace(watch, label=f"lowering {checkpoint.name.lower()} for {device.name}",
                                             code="NP-CMP-504"))
        return compiled, time.perf_counter() - start, False


def _cache_fields(request: ProfileRequest, method: str) -> dict[str, Any]:
    compiled = request.compiled
    mlia_input = None
    if request.device.backend_spec.mlia_estimable and compiled.status == CompileStatus.OK and compiled.tosa_file:
        mlia_input = sha256_file(request.compiled_dir / compiled.tosa_file)
    return {
        "checkpoint_sha256": request.program_sha256, "compiled_sha256": compiled.pte_sha256,
        "estimated_input_sha256": mlia_input, "device": request.device.name, "runtime": request.device.runtime,
        "backend": request.device.backend, "method": method, "target_profile": request.device.mlia_target,
        "versions": {name: tool_version(name) for name in ("mlia", "mlia-ethos-u", "ethos-u-vela", "executorch",
                                                           "torch")} | {"np": np_version()},
        "options": {},
    }


def profile_checkpoint(asked: RoundRequest, *, progress: Callable[[str], None] = lambda _t: None,
                       cache: EstimateCache | None = None, seen: set[str] | None = None) -> ProfileResult:
    """Profile the checkpoint `asked` names with its method: the compilation np run handed over, else an intact
    earlier one, else a new one (see _compiled_for). `progress` shows what runs; `seen` holds the notices and
    warnings already logged for earlier checkpoints of the same command (not repeated); `cache`: tests' estimate cache.

    `asked.watch` bounds a long lowering (Ethos-U) and MLIA's estimate: its limit and the option that sets it
    (default: options["time_limit"], named as run.detail.yaml's profile[N].time_limit); its label and code are set here.

    Long because: compile, cache lookup, method and the failed-round path share the round's base record and log
    lines; split, each part would take a dozen of the same arguments.
    """
    log = get_logger("Profiler")
    checkpoint, device, method, options = asked.checkpoint, asked.device, asked.method, asked.options
    base = round_base(checkpoint=checkpoint.name, job=checkpoint.job, checkpoint_sha256=checkpoint.sha256,
                      device=device, method=method, requested_method=asked.requested_method, trigger=asked.trigger)
    identifier = base["measurement_id"]
    support = device.method(method)
    result_kind = support.result_kind if support else "estimated"
    name = checkpoint.name.lower()
    watch = asked.watch or Watch(limit_s=float(options.get("time_limit", 600)), label=name,
                                 option="run.detail.yaml profile[N].time_limit", progress=progress, log=log)
    watch = replace(watch, progress=progress, log=log)
    log.info(f"Compiling: {name}")
    try:
        handed, compile_s, reused_compile = _compiled_for(asked, progress, watch)
    except Exception as exc:  # an NpError is the user's or a tool's; anything else is a bug, recorded as one
        return failed_round(base, result_kind, exc, log)
    compiled, compiled_dir, experiment_root = handed.record, handed.folder, asked.experiment_root
    if reused_compile and compiled.status != CompileStatus.FAILED:  # a failed one is said below, with its reason
        saved = (compiled.cache.saved_s if compiled.cache else None) or compiled.seconds or 0
        log.info(f"  using the compiled checkpoint of {checkpoint.job} ({compiled.pte_bytes or 0:,} B .pte, "
                 f"compiled earlier from the same .pt2, compile key {compiled.compile_key[:12]}): saved {saved:.1f} s "
                 "of lowering")
    elif compiled.status != CompileStatus.FAILED and (note := reuse_note(compiled)) is not None:
        log.info(f"  using the compiled checkpoint from the {note}")
    reused = "job folder" if reused_compile else (compiled.cache.status if compiled.cache else None) or "miss"
    compile_summary = replace(compiled.summary(), reused=reused,
                              folder=str(compiled_dir.relative_to(experiment_root))).only(CompileSummary.ROUND_KEYS)
    if compiled.status == CompileStatus.FAILED:
        stopped = compiled.stopped
        again = " It was not lowered again: the same time limit would stop it again." if reused_compile else ""
        failure = CompileError(f"{compiled.reason}{again}", hint=stopped.hint, code=stopped.code) \
            if stopped else CompileError(f"Compiling {name} for {device.name} failed: {compiled.reason}",
                              hint="See logs/execution.log; the checkpoint itself is kept.")
        return failed_round(base, result_kind, failure, log, compile=compile_summary)
    runs = f" ({options.get('num_executions')} runs)" if result_kind == "measured" else ""
    log.info(f"Profiling: {name}{runs}")
    work_dir = asked.job_dir / "artifacts" / "profile" / identifier
    request = ProfileRequest(checkpoint=checkpoint.name, job=checkpoint.job, program_path=checkpoint.path,
                             program_sha256=checkpoint.sha256, compiled=compiled, compiled_dir=compiled_dir,
                             device=device, options=options, work_dir=work_dir, log=log,
                             remote=asked.remote, queue_notice=_queue_notice(log), program_stats=asked.stats.as_dict(),
                             watch=replace(watch, label=f"estimating {name} on {device.name}", code="NP-PRF-504"))
    chosen = get_method(method)
    cache_info: dict[str, Any] = {"reused": False, "key": None}
    output: MethodOutput | None = None
    t0 = time.perf_counter()
    store_cache = cache or EstimateCache()
    cache_warnings: list[str] = []
    if chosen.cacheable:
        fields = _cache_fields(request, method)
        key = cache_key(fields)
        cache_info["key"] = key
        if asked.force:
            cache_info["forced"] = True
        else:
            lookup = store_cache.get(key)
            if lookup.warning:
                cache_warnings.append(lookup.warning)
            if lookup.payload is not None:
                try:
                    output = _restore(lookup.payload, work_dir)
                    cache_info.update(reused=True, cached_at=lookup.payload["output"].get("cached_at"))
                except (TypeError, KeyError, AttributeError, OSError) as exc:
                    cache_warnings.append(store_cache.discard(key, type(exc).__name__))
    if output is None:
        try:
            output = chosen.profile(request)
        except Exception as exc:  # an NpError is the user's or a tool's; anything else is a bug, recorded as one
            context = exc.context if isinstance(exc, NpError) else {}
            return failed_round(
                base, result_kind, exc, log, compile=compile_summary, cache=from_dict(RoundCache, cache_info),
                timings={"compile_s": round(compile_s, 3), "profile_s": round(time.perf_counter() - t0, 3),
                         **context.get("timings", {})},
                artifacts={n: str((work_dir / f).relative_to(experiment_root))
                           for n, f in context.get("artifacts", {}).items()},
                warnings=tuple(cache_warnings + list(context.get("warnings", []))),
                extras=context.get("extras", {}), provenance=context.get("provenance", {}))
        if chosen.cacheable and cache_info["key"]:
            payload = asdict(output) | {"cached_at": utc_now()}
            files = {n: (work_dir / f).read_text() for n, f in output.artifacts.items() if (work_dir / f).is_file()}
            store_cache.put(cache_info["key"], _cache_fields(request, method), payload, files)
    notices = list(output.notices)
    if cache_info["reused"]:
        notices.insert(0, f"Reused an earlier {method} estimate of the same compiled checkpoint on {device.name} "
                       f"(cache key {cache_info['key'][:12]}); nothing was recomputed. Use --force to estimate again.")
    layers_file = output.artifacts.get("layers")
    # why ops left the accelerator: one line per checkpoint, in the log and (as a notice) in np report
    left = compiled_summary(compiled_dir / GRAPH_FILE, work_dir / layers_file if layers_file else None)
    if left is not None:
        notices.append(left)
    result = ProfileResult(
        **base, result_kind=output.result_kind, status=RoundStatus.SUCCESS, ended_at=utc_now(),
        metrics=tuple(output.metrics), extras=output.extras, provenance=output.provenance,
        warnings=tuple(cache_warnings + output.warnings), notices=tuple(notices), partial=output.partial,
        cache=from_dict(RoundCache, cache_info),
        timings={"compile_s": round(compile_s, 3), "profile_s": round(time.perf_counter() - t0, 3), **output.timings},
        artifacts={n: str((work_dir / f).relative_to(experiment_root)) for n, f in output.artifacts.items()},
        compile=compile_summary,
    )
    for line in metric_lines(result):
        log.info(line)
    if left is not None:
        log.info(f"  {left}")
    seen = set() if seen is None else seen  # a text already shown for an earlier checkpoint is not repeated
    for notice in result.notices:
        if notice not in seen and notice != left:
            log.info(f"  Note: {notice}")
            seen.add(notice)
    for warning in result.warnings:
        if warning not in seen:
            log.warning(f"  {warning}")
            seen.add(warning)
    return result


def _queue_notice(log: logging.Logger) -> Callable[[str], None]:
    """Device-queue messages: the place and wait as INFO, a wait that overran its estimate as WARN."""

    def notice(text: str) -> None:
        if text.startswith("Warning:"):
            log.warning(text.removeprefix("Warning:").strip())
        else:
            log.info(text)

    return notice


def _restore(payload: dict[str, Any], work_dir: Path) -> MethodOutput:
    """A cached estimate as a method output, its artifact files written back into this measurement's folder."""
    data = dict(payload["output"])
    for key in ("cached_at", "status", "error"):  # status and error: entries written before np 0.2 (always SUCCESS)
        data.pop(key, None)
    data["metrics"] = [from_dict(MetricValue, m) for m in data.get("metrics", [])]
    work_dir.mkdir(parents=True, exist_ok=True)
    for name, text in payload.get("files", {}).items():
        target = data.get("artifacts", {}).get(name)
        if target:
            write_text(work_dir / target, text)
    return MethodOutput(**data)


def round_base(*, checkpoint: str, job: str, checkpoint_sha256: str, device: Device, method: str,
               requested_method: str | None, trigger: str) -> dict[str, Any]:
    """The identifying fields of a new profile round."""
    return dict(measurement_id=measurement_id(), checkpoint=checkpoint, job=job, checkpoint_sha256=checkpoint_sha256,
                device=device.name, runtime=device.runtime, backend=device.backend, method=method,
                requested_method=requested_method, trigger=trigger, started_at=utc_now())


def failed_round(base: dict[str, Any], kind: str, exc: BaseException, log: logging.Logger,
                 **extra: Any) -> ProfileResult:
    """The record of a failed round, built from its exception: the one place this happens.

    An NpError (the user's mistake or a tool's failure) is logged as its message; anything else is a bug in np, whose
    traceback goes to the log file (and to the console with --debug) and whose record says so (NP-GEN-500).
    """
    error = ErrorRecord.of(exc)
    if isinstance(exc, NpError):
        log.error(f"  {exc.message}")
    else:
        log.error(f"  {error.message}", exc_info=exc)
    return ProfileResult(**base, result_kind=kind, status=RoundStatus.FAILED, ended_at=utc_now(), error=error, **extra)
