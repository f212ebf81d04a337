"""Method `mlia`: static estimates.

Ethos-U devices: MLIA's performance estimate (Vela) of the compiled checkpoint's .tosa, one per NPU partition; a
float checkpoint (which the NPU cannot run) goes through MLIA's own .pt2 path, which int8-quantizes it first, and the
result says so. CPU (XNNPACK) devices: MLIA has no CPU target, so np counts MACs and parameters from the exported
graph and says that latency and memory are not given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from np_optimizer.backends import BACKENDS
from np_optimizer.errors import EstimateError, UnsupportedError
from np_optimizer.files import write_text
from np_optimizer.formats import mib
from np_optimizer.metrics import MetricType as M
from np_optimizer.processes import run_watched, stage
from np_optimizer.profiler.methods.base import register_method
from np_optimizer.profiler.request import MethodOutput, ProfileRequest
from np_optimizer.records import MetricValue
from np_optimizer.records.status import CompileStatus
from np_optimizer.versions import np_version, tool_version

__all__ = ["profile_mlia", "static_counts"]

_BOUNDARY_OPS = ("quantize_per_tensor", "dequantize_per_tensor")  # the delegate's input/output (de)quantization


def static_counts(request: ProfileRequest) -> tuple[int, int, str]:
    """(MACs, params, convention) of the exported graph: as its job recorded them for this exact .pt2 (no torch
    needed), else counted now."""
    from np_optimizer.graph.stats import MACS_CONVENTION

    stats = request.program_stats
    if "macs" in stats and "params" in stats:
        return int(stats["macs"]), int(stats["params"]), MACS_CONVENTION
    from np_optimizer.graph.program_io import load_program
    from np_optimizer.graph.stats import count_macs, count_params

    program = load_program(request.program_path)
    return count_macs(program)[0], count_params(program), MACS_CONVENTION


def _graph_source() -> str:
    return f"static count of the exported graph (np {np_version()}, torch {tool_version('torch')})"


def _cpu_scope(request: ProfileRequest) -> MethodOutput:
    macs, params, convention = static_counts(request)
    source = _graph_source()
    device = request.device
    warning = (f"MLIA estimates Arm Ethos-U NPUs only, so on {device.name} ({device.runtime}/{device.backend}) the "
               f"mlia method gives MACs and parameters, counted from the exported graph. Not given: LATENCY, MEMORY, "
               f"MODEL_WEIGHT_MEMORY. For measured latency and memory use --method on-device (on `host`, or on a "
               f"device with an SSH destination in devices.yaml).")
    return MethodOutput(
        result_kind="estimated",
        metrics=[MetricValue(str(M.MACS), macs, "MACs", source=source), MetricValue(str(M.PARAMS), params, "params",
                                                                                   source=source)],
        provenance={"tool": "np graph analysis", "tool_version": np_version(), "torch": tool_version("torch"),
                    "macs_convention": convention, "input": "exported program (.pt2)",
                    "mlia": f"not applicable: MLIA {tool_version('mlia')} has no CPU target"},
        warnings=[warning],
    )


def _value(estimate: dict[str, Any], name: str) -> float:
    return float(estimate["key_metrics"].get(name) or 0.0)


def _estimate_all(request: ProfileRequest) -> tuple[list[dict[str, Any]], list[str], list[str], str]:
    """MLIA estimates (one per .tosa, or one of the float .pt2), notices and warnings, and what was estimated."""
    from np_optimizer.adapters.mlia import estimate
    from np_optimizer.backends.ethos_u import partition_files

    target = request.device.mlia_target or ""
    compiled = request.compiled
    notices: list[str] = []
    warnings: list[str] = []
    if compiled.status == CompileStatus.OK:
        tosa = partition_files(request.compiled_dir / "ethos_u")
        if not tosa:
            raise EstimateError(f"The compiled {request.checkpoint} has no .tosa file in "
                                f"{request.compiled_dir / 'ethos_u'}.", hint="Compile it again: `np profile --force` "
                                "after deleting that compiled_* folder.")

        def each() -> list[dict[str, Any]]:
            out = []
            for i, (tag, path) in enumerate(tosa):
                stage(f"MLIA (Vela) estimate of NPU partition {i + 1} of {len(tosa)} ({tag})")
                out.append(estimate(path, target, request.work_dir / f"mlia_partition{i}")
                           | {"tosa_file": path.name, "partition_tag": tag})
            return out

        estimates = _watched(request, each, "starting MLIA")
        if len(tosa) > 1:
            warnings.append(f"The checkpoint lowered to {len(tosa)} NPU partitions: MLIA estimated each, and np summed "
                            "their latency, MACs, weights and memory (memory is then an upper bound).")
        outside = {k: v for k, v in compiled.non_delegated_histogram.items()
                   if not any(b in k for b in _BOUNDARY_OPS)}
        if outside:
            ops = ", ".join(f"{k.split('.')[-2] if k.count('.') > 1 else k} x{v}" for k, v in sorted(outside.items()))
            warnings.append(f"{sum(outside.values())} op(s) run on the CPU outside the NPU ({ops}): the figures cover "
                            "the NPU part only; the CPU part's time and memory are not included.")
        return estimates, notices, warnings, "compiled .tosa (ExecuTorch Arm backend)"
    if compiled.quantized:  # quantized, yet nothing was delegated: estimating MLIA's own int8 version would mislead
        raise UnsupportedError(f"{request.checkpoint} is quantized but the Ethos-U partitioner delegated none of its "
                               f"ops ({compiled.reason}); there is no NPU program to estimate.",
                               hint="See the compile record (np status); the checkpoint's ops may not be supported by "
                               "this Ethos-U.", code="NP-PRF-422")
    notices.append("This checkpoint is float, which the Ethos-U NPU cannot run as it is: MLIA estimated it through its "
                   ".pt2 path, which first quantizes it with default int8 post-training quantization (calibrated on "
                   "the example input only). The figures describe that int8 model, not this float checkpoint.")

    def whole() -> list[dict[str, Any]]:
        stage("MLIA estimate of the float .pt2 (MLIA quantizes it, lowers it to TOSA, then runs Vela)")
        return [estimate(request.program_path, target, request.work_dir / "mlia")]

    return _watched(request, whole, "starting MLIA"), notices, warnings, \
        "float .pt2 quantized by MLIA (default int8 PTQ)"


def _watched(request: ProfileRequest, work: Callable[[], list[dict[str, Any]]],
             first: str) -> list[dict[str, Any]]:
    """MLIA's estimates in a watched child process (its stage and time on the progress line, stopped at the time
    limit), or here when the request has no watch."""
    return work() if request.watch is None else run_watched(work, request.watch, first)


def _ethos_u(request: ProfileRequest) -> MethodOutput:
    """MLIA's estimate of an Ethos-U checkpoint as metrics, extras and provenance.

    Long because: each metric states how it was obtained (tool versions, target, what the number covers); the
    mapping from MLIA's estimate to np's metrics is kept in one place.
    """
    estimates, notices, warnings, estimated_input = _estimate_all(request)
    first = estimates[0]
    for item in estimates:
        warnings += [w.split(": ", 1)[1] if ": " in w else w for w in item["warnings"]]
    total_cycles = sum(_value(e, "total_cycles") for e in estimates)
    if total_cycles == 0:
        warnings.append("MLIA estimated zero cycles: no work was placed on the NPU, so latency and memory are left "
                        "out; they would not describe this model's run time.")
    latency = sum(_value(e, "inference_time") for e in estimates)
    memory_bytes = sum(float(e["memory"]["total_bytes"]) for e in estimates)
    weights = sum(_value(e, "model_weight_memory") for e in estimates)
    macs = sum(_value(e, "nn_macs") for e in estimates)
    _macs, params, convention = static_counts(request)
    clock = first["core_clock_hz"]
    tool = f"MLIA {first['mlia_version']} / Vela {first['vela_version']}"
    where = f"{first['target_profile']} @ {clock / 1e6:g} MHz"
    memory_detail = " + ".join(f"{area} {sum(float(e['memory'][f'{area}_bytes']) for e in estimates):,.0f} B"
                               for area in ("sram", "dram", "on_chip_flash", "off_chip_flash")
                               if any(e["memory"][f"{area}_bytes"] for e in estimates))
    memory_source = (f"estimated by {tool}: SRAM + DRAM + flash used ({memory_detail or '0 B'}), "
                     f"{first['system_config']}, {first['memory_mode']}")
    npu_layers = sum(e["placement"]["npu"] for e in estimates)
    cpu_layers = sum(e["placement"]["cpu"] for e in estimates)
    compiled = request.compiled
    op_share = (100.0 * compiled.delegated_ops / compiled.total_ops) if compiled.total_ops and \
        compiled.status == CompileStatus.OK else None
    metrics = [MetricValue(str(M.PARAMS), params, "params", source=_graph_source())]
    if total_cycles > 0:  # zero cycles: nothing ran on the NPU, and a 0 ms latency would be a fake number
        metrics += [
            MetricValue(str(M.LATENCY), latency, "ms", stat="estimate", source=f"estimated by {tool}, {where}"),
            MetricValue(str(M.MEMORY), mib(memory_bytes), "MB", stat="footprint", source=memory_source),
            MetricValue(str(M.NPU_CYCLES), sum(_value(e, "npu_cycles") for e in estimates), "cycles", source=tool),
            MetricValue(str(M.TOTAL_CYCLES), total_cycles, "cycles", source=tool),
            MetricValue(str(M.INFERENCES_PER_SECOND), 1000.0 / latency, "1/s", source=tool),
        ]
    if weights > 0:
        metrics.append(MetricValue(str(M.MODEL_WEIGHT_MEMORY), weights, "B",
                                   source=f"NPU-encoded weights, estimated by {tool}"))
    if macs > 0:
        metrics.append(MetricValue(str(M.MACS), macs, "MACs", source=f"nn_macs by {tool}"))
    if op_share is not None:
        metrics.append(MetricValue(str(M.NPU_OP_SHARE), round(op_share, 2), "%",
                                   source="ops inside the Ethos-U delegate / all ops of the compiled program"))
    metrics, coverage, layers_file = _with_layers(request, estimates, metrics, total_cycles, warnings)
    request.work_dir.mkdir(parents=True, exist_ok=True)
    breakdown = request.work_dir / "mlia_per_layer.json"
    write_text(breakdown, json.dumps([{"partition": i, **e["per_layer"]} for i, e in enumerate(estimates)], indent=1))
    raw = request.work_dir / "mlia_output.json"
    write_text(raw, json.dumps([e["raw"] for e in estimates], indent=1))
    return MethodOutput(
        result_kind="estimated", metrics=metrics,
        extras={"memory_bytes": {k: sum(float(e["memory"][k]) for e in estimates) for k in (
            "sram_bytes", "dram_bytes", "on_chip_flash_bytes", "off_chip_flash_bytes", "total_bytes")},
            "peak_activation_memory_bytes": max(float(e["memory"]["peak_activation_memory_bytes"] or 0)
                                                for e in estimates),
            "vela_layers": {"npu": npu_layers, "cpu": cpu_layers}, "partitions": len(estimates),
            "weights_area": first["memory"]["weights_area"], "feature_map_area": first["memory"]["feature_map_area"],
            "coverage": coverage},
        provenance={"tool": "mlia", "tool_version": first["mlia_version"], "vela_version": first["vela_version"],
                    "target_profile": first["target_profile"], "core_clock_hz": clock,
                    "system_config": first["system_config"], "memory_mode": first["memory_mode"],
                    "estimated_input": estimated_input, "macs_convention": "nn_macs as counted by Vela",
                    "params_convention": convention, "mlia_warnings": first["mlia_warnings"]},
        warnings=list(dict.fromkeys(warnings)), notices=notices,
        artifacts={"per_layer": breakdown.name, "mlia_output": raw.name, "layers": layers_file},
    )


def _with_layers(request: ProfileRequest, estimates: list[dict[str, Any]], metrics: list[MetricValue],
                 total_cycles: float, warnings: list[str]) -> tuple[list[MetricValue], dict[str, Any] | None, str]:
    """Write the round's layers.json; when the totals cover the NPU part only, mark them and warn naming the layers
    left out (a partial total never stands unmarked)."""
    from np_optimizer.layers.coverage import PARTIAL_METRICS, coverage_text, left_out_warning, macs_disagreement
    from np_optimizer.layers.ethos_u import ethos_u_layers
    from np_optimizer.layers.files import write_layers

    document = ethos_u_layers(estimates, request.compiled_dir, total_cycles=total_cycles,
                              estimated_compiled=request.compiled.status == CompileStatus.OK)
    document.update(checkpoint=request.checkpoint, device=request.device.name, method="mlia")
    coverage = document["coverage"]
    if coverage and coverage.get("partial"):
        text = coverage_text(coverage)
        metrics = [replace(m, coverage=text) if m.metric_type in PARTIAL_METRICS else m for m in metrics]
        if coverage.get("left_out"):  # replaces the op-histogram warning: this one names the layers
            warnings[:] = [w for w in warnings if "run on the CPU outside the NPU" not in w]
            warnings.append(left_out_warning(coverage))
    warnings += document["warnings"]
    graph = document.pop("_graph", None)
    tool_macs = next((m.value for m in metrics if m.metric_type == "MACS"), 0.0)
    if graph and tool_macs:  # one convention per column: Vela's count here, np's beside it, a warning if far apart
        document["macs"], differ = macs_disagreement(tool_macs, graph, document["rows"])
        if differ:
            warnings.append(differ)
    return metrics, coverage, write_layers(request.work_dir, document)


def _no_layer_costs(result: dict[str, Any]) -> str | None:
    backend = BACKENDS.find(str(result.get("backend")))
    if backend is not None and backend.layer_costs:
        return None
    return f"MLIA has no per-layer estimate for {result.get('device')}'s CPU (np counts MACs there, not cycles)"


@register_method("mlia", cacheable=True, no_layer_costs=_no_layer_costs)
def profile_mlia(request: ProfileRequest) -> MethodOutput:
    """MLIA's estimate where the backend has an MLIA target, else the static counts; failures raise np errors
    (UnsupportedError when there is no NPU program, EstimateError when MLIA or Vela fail)."""
    if not request.device.backend_spec.mlia_estimable:
        return _cpu_scope(request)
    return _ethos_u(request)
