"""Compile a checkpoint for a device. Options come from the device catalogue only, never from run.yaml.

    compile_checkpoint(program_path, device, out_dir) -> CompileResult   (imports torch and ExecuTorch)
    find_compiled(out_dir, device, program_sha256)    -> CompileResult | None   (no torch: reads compile.json)

Each compiled checkpoint lives in `<job>/artifacts/compiled_<device>/` with a compile.json that says what it was
compiled from (the .pt2's sha256) and with which tool versions, so a later command reuses it instead of compiling
again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from np_optimizer.backends import get_backend
from np_optimizer.compile.result import CompileResult, read_compile_record, write_compile_record
from np_optimizer.devices import Device
from np_optimizer.errors import ToolError
from np_optimizer.models.source import sha256_file
from np_optimizer.versions import tool_version

__all__ = ["CompileResult", "compile_checkpoint", "find_compiled", "compile_dir", "compile_key"]


def compile_dir(job_dir: Path, device: Device) -> Path:
    return job_dir / "artifacts" / f"compiled_{device.name}"


def _versions(device: Device) -> dict[str, str]:
    return {name: tool_version(name) for name in get_backend(device.backend).tool_versions}


def compile_key(program_sha256: str, device: Device) -> str:
    """What determines the compiled bytes: the program, the device's backend and target, the tool versions."""
    spec = {"program": program_sha256, "backend": device.backend, "target": device.mlia_target,
            "versions": _versions(device)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def find_compiled(out_dir: Path, device: Device, program_sha256: str) -> CompileResult | None:
    """A finished compilation of exactly this program for this device, whose .pte is intact; else None."""
    record = read_compile_record(out_dir)
    if record is None or record.compile_key != compile_key(program_sha256, device):
        return None
    if record.status == "failed":
        return None
    if record.pte_file:
        pte = out_dir / record.pte_file
        if not pte.is_file() or sha256_file(pte) != record.pte_sha256:
            return None
    return record


def compile_checkpoint(program_path: Path, device: Device, out_dir: Path, *,
                       program_sha256: str | None = None) -> CompileResult:
    """Lower the .pt2 for `device` into `out_dir` (replacing what was there) and record the result.

    A lowering the device cannot use (zero delegates on an NPU) is a result with status "unsupported"; a lowering
    that crashes is a result with status "failed" and the reason. Neither raises.
    """
    from np_optimizer.graph.program_io import load_program

    sha = program_sha256 or sha256_file(program_path)
    key = compile_key(sha, device)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    start = time.perf_counter()
    base: dict[str, Any] = {"device": device.name, "backend": device.backend, "target": device.mlia_target,
                            "program_sha256": sha, "compile_key": key, "versions": _versions(device)}
    try:
        program = load_program(program_path)
        fields = get_backend(device.backend).lower(program, device.mlia_target, out_dir)
    except ToolError:
        raise
    except (Exception, SystemExit) as exc:  # Vela ends a compile it cannot do with SystemExit
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result = CompileResult(**base, status="failed", reason=f"{type(exc).__name__}: {first}",
                               seconds=time.perf_counter() - start)
        write_compile_record(out_dir, result)
        return result
    pte = out_dir / fields["pte_file"]
    result = CompileResult(**base, **fields, pte_bytes=pte.stat().st_size, pte_sha256=sha256_file(pte),
                           seconds=round(time.perf_counter() - start, 3))
    write_compile_record(out_dir, result)
    return result
