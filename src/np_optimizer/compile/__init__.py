"""Compile a checkpoint for a device. Options come from the device catalogue only, never from run.yaml.

    compile_for(checkpoint, device, job_dir, stats)   -> CompiledCheckpoint   (a job's checkpoint, typed for the
                                                                              profiler: np run hands it over)
    compile_checkpoint(program_path, device, out_dir) -> CompileResult   (imports torch and ExecuTorch)
    find_compiled(out_dir, device, program_sha256)    -> CompileResult | None   (no torch: reads compile.json; for
                                                                              a checkpoint nothing handed over)

Each compiled checkpoint lives in `<job>/artifacts/compiled_<device>/` with a compile.json that says what it was
compiled from (the .pt2's sha256) and with which tool versions, so a later command reuses it instead of compiling
again. Across jobs, experiments and devices, the compile cache (compile/cache.py) keeps every compiled program by
`compile_key`: a compilation whose key is there is a copy of the cached files, not a lowering.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.adapters.torch_private import lean_lowering
from np_optimizer.backends import get_backend
from np_optimizer.compile.cache import ENTRY_FILE, CachedCompile, CompileCache
from np_optimizer.compile.result import CompileResult, read_compile_record, write_compile_record
from np_optimizer.devices import Device
from np_optimizer.errors import TimeLimitError, ToolError
from np_optimizer.models.source import sha256_file
from np_optimizer.processes import Watch, run_watched, stage
from np_optimizer.records import CheckpointRef, from_dict, to_dict
from np_optimizer.records.compiled import CompiledCheckpoint, ProgramStats
from np_optimizer.records.parts import CompileCacheUse, CompileStop
from np_optimizer.records.status import CacheStatus, CompileStatus
from np_optimizer.versions import tool_version

if TYPE_CHECKING:
    from torch.export import ExportedProgram

PTE_FILE = "model.pte"  # in every compile folder

__all__ = ["CompileResult", "CompileCache", "CompiledCheckpoint", "compile_for", "compile_checkpoint", "find_compiled",
           "compile_dir", "compile_key", "reuse_note", "stopped_compile", "stopped_under", "Watch"]

_log = logging.getLogger("np.Compiler")
# What np writes into a compile folder besides the .pte (layers_graph.json, Arm debug_<tag>.json, ...), np's own
# passes before the backend's (4: quantized embedding tables to ExecuTorch's embedding kernels) and what np leaves of
# the backend's compile specs in the .pte (5: no compile folder, no vela.ini location), what layers_graph.json holds
# (6: each op left outside the delegates with the partitioner's reason), no ETRecord (7: made when asked for,
# compile/etrecord.py): raised when any changes, so a cached compilation made the old way is not reused.
COMPILE_LAYOUT = 7


def compile_dir(job_dir: Path, device: Device) -> Path:
    return job_dir / "artifacts" / f"compiled_{device.name}"


def _versions(device: Device) -> dict[str, str]:
    return {name: tool_version(name) for name in get_backend(device.backend).tool_versions}


def compile_key(program_sha256: str, device: Device) -> str:
    """What determines the compiled bytes: the program, the backend, the compile options that backend uses for this
    device (not the device's name: raspberry_pi_5 and host compile the same XNNPACK program), the tool versions."""
    backend = get_backend(device.backend)
    spec = {"program": program_sha256, "backend": device.backend, "options": backend.compile_options(device.mlia_target),
            "versions": _versions(device), "layout": COMPILE_LAYOUT}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def find_compiled(out_dir: Path, device: Device, program_sha256: str) -> CompileResult | None:
    """A finished compilation of exactly this program for this device, whose .pte is intact; else None."""
    record = read_compile_record(out_dir)
    if record is None or record.compile_key != compile_key(program_sha256, device):
        return None
    if record.status == CompileStatus.FAILED:
        return None
    if record.pte_file:
        pte = out_dir / record.pte_file
        if not pte.is_file() or sha256_file(pte) != record.pte_sha256:
            return None
    return record


def stopped_compile(out_dir: Path, device: Device, program_sha256: str, limit_s: float) -> CompileResult | None:
    """The compilation of exactly this program for this device that a time limit at least `limit_s` stopped: lowering
    it again under the same limit would be stopped again, so the caller reports it instead of waiting once more."""
    record = read_compile_record(out_dir)
    if record is None or not stopped_under(record, limit_s):
        return None
    return record if record.compile_key == compile_key(program_sha256, device) else None


def stopped_under(record: CompileResult, limit_s: float) -> bool:
    """Whether a time limit at least `limit_s` stopped this compilation (so the same limit would stop it again)."""
    return record.status == CompileStatus.FAILED and record.stopped is not None and \
        float(record.stopped.limit_s or 0) >= limit_s


def compile_checkpoint(program_path: Path, device: Device, out_dir: Path, *,
                       program_sha256: str | None = None, cache: CompileCache | None = None,
                       program: ExportedProgram | None = None, watch: Watch | None = None) -> CompileResult:
    """Lower the .pt2 for `device` into `out_dir` (replacing what was there) and record the result; or, when the
    compile cache holds the same key, copy its files instead of lowering.

    A lowering the device cannot use (zero delegates on an NPU) is a result with status "unsupported"; a lowering
    that crashes is a result with status "failed" and the reason. Neither raises. `program`, when given, is the
    .pt2 already loaded (the caller's own copy: lowering may change it), saving a second load. With `watch`, a
    backend whose lowering can run for minutes (Backend.watched: Ethos-U) lowers in a watched child process: its
    stage and time on the progress line, stopped at the watch's limit (status "failed", `stopped` says when and why).
    """
    sha = program_sha256 or sha256_file(program_path)
    key = compile_key(sha, device)
    cache = cache or CompileCache()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    start = time.perf_counter()
    hit, warning = cache.get(key)
    if warning:
        _log.warning(warning)
    if hit is not None:
        try:
            return _from_cache(hit, device, out_dir, start)
        except OSError as exc:  # pruned while copying: compile instead
            _log.warning(f"The compile cache entry {hit.folder} could not be copied ({exc.strerror or exc}); "
                         "compiling again.")
            shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    result = _lower(program_path, device, out_dir, sha, key, start, program, watch)
    if result.status != CompileStatus.FAILED:  # a failure may be transient (memory, a killed tool): never cached
        stored = cache.put(key, out_dir, to_dict(result))
        entry = str(stored) if stored else None
        result = replace(result, cache=CompileCacheUse.miss(key, entry))
    write_compile_record(out_dir, result)
    return result


def compile_for(checkpoint: CheckpointRef, device: Device, job_dir: Path, *, stats: ProgramStats = ProgramStats(),
                program: ExportedProgram | None = None, watch: Watch | None = None,
                cache: CompileCache | None = None) -> CompiledCheckpoint:
    """Compile a job's checkpoint into the job's compile folder for `device` (compile_checkpoint), as the typed
    compiled checkpoint the profiler takes: its folder, compile record (key, .pte sha256, delegation) and `stats`."""
    out_dir = compile_dir(job_dir, device)
    record = compile_checkpoint(checkpoint.path, device, out_dir, program_sha256=checkpoint.sha256, cache=cache,
                                program=program, watch=watch)
    return CompiledCheckpoint(checkpoint=checkpoint, folder=out_dir, record=record, stats=stats)


def _lower(program_path: Path, device: Device, out_dir: Path, sha: str, key: str, start: float,
           program: ExportedProgram | None, watch: Watch | None) -> CompileResult:
    from np_optimizer.graph.program_io import load_program

    base: dict[str, Any] = {"device": device.name, "backend": device.backend, "target": device.mlia_target,
                            "program_sha256": sha, "compile_key": key, "versions": _versions(device)}
    try:
        if os.environ.get("NP_FAULT") == "no-lowering":  # tests: prove that a command compiled nothing
            raise RuntimeError("NP_FAULT=no-lowering: a lowering was attempted")
        loaded = program if program is not None else load_program(program_path)
        backend = get_backend(device.backend)
        if watch is not None and backend.watched:
            if backend.preload is not None:
                backend.preload()
            fields = run_watched(lambda: _lower_and_write(loaded, device, out_dir), watch, "starting the lowering")
        else:
            fields = _lower_and_write(loaded, device, out_dir)
    except TimeLimitError as exc:
        stopped = CompileStop(limit_s=exc.limit_s, after_s=exc.elapsed_s, stage=exc.stage, option=exc.option,
                              code=exc.code, hint=exc.hint)
        return CompileResult(**base, status=CompileStatus.FAILED, reason=exc.message, stopped=stopped,
                             seconds=round(time.perf_counter() - start, 3))
    except ToolError as exc:
        if watch is None or exc.code != "NP-TOOL-500":
            raise
        return CompileResult(**base, status=CompileStatus.FAILED, reason=exc.message, seconds=time.perf_counter() - start)
    except (Exception, SystemExit) as exc:  # Vela ends a compile it cannot do with SystemExit
        return CompileResult(**base, status=CompileStatus.FAILED, reason=f"{type(exc).__name__}: {_first_line(exc)}",
                             seconds=time.perf_counter() - start)
    return CompileResult(**base, **fields, seconds=round(time.perf_counter() - start, 3))


@lean_lowering()
def _lower_and_write(program: ExportedProgram, device: Device, out_dir: Path) -> dict[str, Any]:
    """Lower through the device's backend (which writes nothing of np's), then write what it gave: the per-op layer
    file (read before to_executorch, whose passes rewrite the graph), the .pte (atomic: a crash never leaves half a
    .pte), and the record's fields. Lowering runs under adapters/torch_private.lean_lowering (its patches of upstream
    waste): the same programs and files, less copying and less repeated work."""
    from np_optimizer.files import write_bytes
    from np_optimizer.graph.delegation import delegation_stats, planned_arena_bytes
    from np_optimizer.layers.graph import write_program_layers
    from np_optimizer.layers.trace_map import delegate_handles, write_trace_files

    backend = get_backend(device.backend)
    found = backend.lower(program, device.mlia_target, out_dir)
    edge = found.edge
    stage("writing the .pte")
    lowered = edge.exported_program()
    stats = delegation_stats(lowered)
    # per-op placement, module keys and why an op stayed outside the delegates, for the views
    write_program_layers(lowered, out_dir, rejected=found.rejected, no_reason=backend.no_reason,
                         accelerator=backend.accelerator)
    delegates = delegate_handles(lowered, backend) if backend.runs_on_host else []
    executorch_program = edge.to_executorch(config=backend.executorch_config() if backend.executorch_config else None)
    pte = out_dir / PTE_FILE
    buffer = executorch_program.buffer
    write_bytes(pte, buffer)
    if backend.runs_on_host:  # what per-layer host times need: the map of instructions to layers (no ETRecord)
        write_trace_files(executorch_program, delegates, out_dir)
    return {"pte_file": pte.name, "pte_bytes": len(buffer), "pte_sha256": hashlib.sha256(buffer).hexdigest(),
            **stats, "status": CompileStatus.OK, "reason": None,
            "planned_arena_bytes": planned_arena_bytes(executorch_program),
            **backend.describe(program, device.mlia_target, stats, out_dir)}


def _from_cache(hit: CachedCompile, device: Device, out_dir: Path, start: float) -> CompileResult:
    """The cached files copied into `out_dir`, with the stored record made this device's."""
    shutil.copytree(hit.folder, out_dir, ignore=shutil.ignore_patterns(ENTRY_FILE))
    stored = from_dict(CompileResult, {k: v for k, v in hit.record.items() if k != "cache"})
    saved = stored.seconds
    result = replace(stored, device=device.name, target=device.mlia_target, seconds=round(time.perf_counter() - start, 3),
                     cache=CompileCacheUse.hit(hit.key, str(hit.folder), saved, stored.device))
    write_compile_record(out_dir, result)
    return result


def reuse_note(result: CompileResult) -> str | None:
    """How a compilation was reused, for log lines: the cache entry and the lowering time saved; None if it was not."""
    cache = result.cache
    if cache is None or cache.status != CacheStatus.HIT:
        return None
    return (f"compile cache entry {str(cache.key)[:12]}, first compiled for {cache.compiled_for}: "
            f"saved {float(cache.saved_s or 0):.1f} s of lowering")


def _first_line(exc: BaseException) -> str:
    """The exception's first line; when that line only announces a list ("TOSA FB Reader error:"), the first items of
    the list too, so the reason says what went wrong."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return " ".join(lines[:4])[:500]
    return lines[0]
