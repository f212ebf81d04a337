"""Lower an exported program for an Ethos-U NPU: TOSA, then Vela, inside ExecuTorch's Arm backend.

The .tosa and Vela's summary CSV are kept beside the .pte. A float program gives zero delegates and no error (the
Ethos-U TOSA profile is integer only): that is recorded as "lowering unsupported", not raised.
"""

from __future__ import annotations

import contextlib
import csv
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.compile.stats import delegation_stats, planned_arena_bytes
from np_optimizer.compile.xnnpack import register_quantized_out_variants

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["lower_ethos_u", "is_quantized", "read_vela_summary"]

# The Arm backend runs Vela with --verbose-all (hundreds of lines per delegate) whenever this logger is enabled for
# INFO, which a root logger at INFO does: keep it at WARNING while lowering.
_VERBOSE_LOGGER = "executorch.backends.arm.ethosu.backend"


@contextlib.contextmanager
def _logger_level(name: str, level: int) -> Iterator[None]:
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def is_quantized(program: ExportedProgram) -> bool:
    return any(n.op == "call_function" and "quantize_per" in str(n.target) for n in program.graph.nodes)


def read_vela_summary(path: Path) -> dict[str, Any]:
    """First row of Vela's summary CSV with numbers parsed (Vela's units: seconds and KiB)."""
    with open(path, newline="") as handle:
        row = next(csv.DictReader(handle))
    out: dict[str, Any] = {}
    for key, value in row.items():
        for cast in (int, float):
            try:
                out[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def vela_settings(target: str) -> dict[str, str]:
    """The Vela system config, memory mode and vela.ini of MLIA's target profile, so the compiled .pte and MLIA's
    estimate describe the same memory layout (ExecuTorch's own default for U85 is Sram_Only, MLIA's Dedicated_Sram)."""
    from mlia.target.registry import profile  # light: imports no torch

    config = profile(target)
    resolved = config.resolved_compiler_config
    return {"system_config": resolved.system_config, "memory_mode": resolved.memory_mode,
            "config_ini": str(config.compiler_options.config_file)}


def lower_ethos_u(program: ExportedProgram, target: str, out_dir: Path) -> dict[str, Any]:
    from executorch.backends.arm import EthosUCompileSpec, EthosUPartitioner
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

    register_quantized_out_variants()
    artifacts = out_dir / "ethos_u"
    artifacts.mkdir(parents=True, exist_ok=True)
    vela = vela_settings(target)
    spec = EthosUCompileSpec(target, system_config=vela["system_config"], memory_mode=vela["memory_mode"],
                             config_ini=vela["config_ini"])
    spec.dump_intermediate_artifacts_to(str(artifacts))  # before the partitioner copies the spec
    with _logger_level(_VERBOSE_LOGGER, logging.WARNING):
        edge = to_edge_transform_and_lower(
            program,
            partitioner=[EthosUPartitioner(spec)],
            # As in Arm's reference flow (aot_arm_compiler.py): its passes emit non-core-ATen ops.
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
    stats = delegation_stats(edge.exported_program())
    executorch_program = edge.to_executorch(config=ExecutorchBackendConfig(extract_delegate_segments=False))
    pte = out_dir / "model.pte"
    pte.write_bytes(executorch_program.buffer)
    # Files of executorch 1.4.1's Arm backend: output_tag<N>_<spec>.tosa per delegate, and Vela's
    # output/out_summary_<system config>.csv for the last delegate only (Vela overwrites per delegate).
    tosa = sorted(artifacts.glob("output_tag*.tosa"))
    summaries = sorted(artifacts.glob("output/out_summary_*.csv"))
    status, reason = "ok", None
    if stats["num_delegates"] == 0:
        status = "unsupported"
        reason = ("the checkpoint is float: Ethos-U runs int8/int16 only, so no operator was delegated "
                  "(quantize it with graph_quantize)" if not is_quantized(program)
                  else "no operator of the checkpoint is supported by the Ethos-U partitioner")
    return {
        "pte_file": pte.name,
        **stats,
        "status": status,
        "reason": reason,
        "planned_arena_bytes": planned_arena_bytes(executorch_program),
        "tosa_file": str(tosa[-1].relative_to(out_dir)) if tosa else None,
        "vela_summary_file": str(summaries[0].relative_to(out_dir)) if summaries else None,
        "vela_summary": read_vela_summary(summaries[0]) if summaries else None,
        "vela_summary_partial": stats["num_delegates"] > 1,
        "vela_config": vela,
        "quantized": is_quantized(program),
    }
