"""Adapter for Arm ML Inference Advisor (MLIA) performance estimates (Vela backend).

Verified with mlia 0.12.2, mlia-ethos-u 0.1.0, mlia-converters-pytorch 0.1.2, ethos-u-vela 5.2.0.
Importing this module is cheap: mlia (and, for .pt2 inputs, torch/executorch) is imported on first use.

Public functions:
  estimate(model_path, target_profile, work_dir)      in-process, mlia.run_advisor("performance", ...)
  profile_info(target_profile)                        target profile TOML + vela.ini facts (clock, memory mode)

Each call owns `<work_dir>/mlia-output/`: MLIA deletes and recreates that folder on every run, so give every
run (and every concurrent process) its own work_dir. Nothing is written outside work_dir/out_dir.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from np_optimizer.errors import EstimateError

SUPPORTED_SUFFIXES = (".tosa", ".tflite", ".pt2")
OUTPUT_SUBDIR = "mlia-output"  # fixed by MLIA (mlia.core.context.ExecutionContext)
LOG_FILE = "mlia.log"

# Metrics np shows first; every metric MLIA reports is still kept verbatim in result["metrics"].
KEY_METRICS = (
    "npu_cycles",
    "total_cycles",
    "inference_time",
    "inferences_per_second",
    "sram_memory_used",
    "dram_memory_used",
    "on_chip_flash_memory_used",
    "off_chip_flash_memory_used",
    "model_weight_memory",
    "peak_activation_memory",
    "nn_macs",
)
MEMORY_AREAS = (
    ("sram", "sram_memory_used"),
    ("dram", "dram_memory_used"),
    ("on_chip_flash", "on_chip_flash_memory_used"),
    ("off_chip_flash", "off_chip_flash_memory_used"),
)
PT2_QUANTIZATION_NOTE = (
    "MLIA quantized the float .pt2 itself: torch.export.load, ExportedProgram.module(check_guards=False), "
    "executorch TOSAQuantizer(TosaCompileSpec('TOSA-1.0+INT')) with get_symmetric_quantization_config() "
    "(int8, per-channel weights, HistogramObserver activations), prepare_pt2e, ONE calibration pass on the "
    "example inputs stored in the .pt2 (ExportedProgram.example_inputs), convert_pt2e, TOSAPartitioner, "
    "then Vela on output_tag0 only. Generic TOSA INT, not the Ethos-U55 subset."
)

class MliaEstimateError(EstimateError):
    """MLIA or Vela failed. `causes` is the exception chain, outermost first; the last is the root cause."""

    def __init__(self, message: str, causes: list[str], log_file: Path | None = None) -> None:
        root = causes[-1] if causes else message
        super().__init__(message.splitlines()[0], hint=f"Root cause: {root.splitlines()[0]}", code="NP-PRF-500",
                         root_cause=root)
        self.causes = causes
        self.log_file = log_file


# --------------------------------------------------------------------------- in-process API


def estimate(model_path: Path, target_profile: str, work_dir: Path) -> dict[str, Any]:
    """Estimate performance of a .tosa / .tflite / float .pt2 with MLIA's Vela backend, in-process.

    target_profile: a built-in name (ethos-u55-128, ethos-u85-256, ...) or the path of a custom profile TOML.

    Artifacts (Vela summary/per-layer CSV, debug XML, compiled .npz/.tflite, converted .tosa for .pt2,
    mlia-output.json) land in work_dir/mlia-output/ (recreated by MLIA on each run); MLIA's log and
    captured third-party output go to work_dir/mlia.log. Raises MliaEstimateError on failure.
    """
    try:
        model = _check_model(Path(model_path))
    except (FileNotFoundError, ValueError) as exc:
        raise MliaEstimateError(f"MLIA cannot estimate {Path(model_path).name}: {exc}", [str(exc)]) from exc
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    log_file = work / LOG_FILE
    with _route_mlia_logs(log_file), _keep_recursion_limit():
        run_advisor = _import_run_advisor()  # plugin loading logs at import: keep it inside the routing
        started = time.perf_counter()
        try:
            doc = run_advisor(
                "performance",
                target_profile,
                model=model,
                backends=["vela"],
                write_output_files=True,
                output_dir=work,
            )
        except Exception as err:  # MLIA wraps Vela failures in RuntimeError/ConfigurationError
            raise _wrap_error(err, model, target_profile, log_file) from err
        elapsed = time.perf_counter() - started
        result = normalize(doc, work / OUTPUT_SUBDIR, target_profile)
    result.update(runner="api", elapsed_s=elapsed, model_path=str(model), log_file=str(log_file))
    _add_pt2_facts(result, model, work / OUTPUT_SUBDIR)
    return result


def _import_run_advisor() -> Any:
    """Import mlia lazily. Its logging.captureWarnings(True) at import is undone by _route_mlia_logs."""
    from mlia import run_advisor

    return run_advisor


@contextlib.contextmanager
def _route_mlia_logs(log_file: Path) -> Iterator[None]:
    """Send the 'mlia' and 'py.warnings' loggers to log_file only (no console, no propagation to root).

    run_advisor already redirects fds 1/2 while it runs and re-emits what it caught on the 'mlia.api'
    logger at DEBUG, so with this handler everything third-party code printed ends up in the log file.
    """
    handler = logging.FileHandler(log_file, mode="a", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger("mlia"), logging.getLogger("py.warnings")]
    saved = [(lg, lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
    showwarning = warnings.showwarning
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)  # mlia's import-time captureWarnings(True) would leak to the host
        warnings.showwarning = showwarning
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()


@contextlib.contextmanager
def _keep_recursion_limit() -> Iterator[None]:
    """VelaCompiler.__init__ calls sys.setrecursionlimit(1000) for the whole process: restore ours."""
    limit = sys.getrecursionlimit()
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _wrap_error(err: BaseException, model: Path, profile: str, log_file: Path | None) -> MliaEstimateError:
    causes: list[str] = []
    seen: BaseException | None = err
    while seen is not None and len(causes) < 10:
        causes.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    msg = f"MLIA could not estimate {model.name} on {profile}: {causes[-1].splitlines()[0]}"
    return MliaEstimateError(msg, causes, log_file)


def _check_model(model_path: Path) -> Path:
    model = model_path.resolve()
    if not model.is_file():
        raise FileNotFoundError(model)
    if model.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise ValueError(f"{model.name}: MLIA performance needs one of {SUPPORTED_SUFFIXES}")
    return model


# --------------------------------------------------------------------------- normalization


def normalize(doc: dict[str, Any], artifacts_dir: Path | None, target_profile: str) -> dict[str, Any]:
    """Turn MLIA's standardized output (schema 1.2.0) into np's result dict. `raw` keeps the document."""
    result = _single_result(doc)
    backend = _vela_backend(doc)
    metrics = [_metric(m) for m in result.get("metrics", [])]
    values = {m["name"]: m["value"] for m in metrics}
    placement = placement_summary(result)
    summary_csv = _vela_summary_csv(artifacts_dir)
    profile = profile_info(target_profile)
    out: dict[str, Any] = {
        "status": result.get("status"),
        "target_profile": target_profile,
        "target": doc.get("target", {}).get("configuration", {}).get("target"),
        "mac": doc.get("target", {}).get("configuration", {}).get("mac"),
        "mlia_version": doc.get("tool", {}).get("version"),
        "vela_version": backend.get("version"),
        "schema_version": doc.get("schema_version"),
        "system_config": backend.get("configuration", {}).get("system_config"),
        "memory_mode": backend.get("configuration", {}).get("memory_mode"),
        "accelerator_config": backend.get("configuration", {}).get("accelerator_config"),
        "core_clock_hz": profile["core_clock_hz"],
        "profile": profile,
        "vela_summary": summary_csv,
        "model": doc.get("model", {}),
        "key_metrics": {name: values.get(name) for name in KEY_METRICS},
        "metrics": metrics,
        "memory": memory_summary(values, summary_csv, profile),
        "placement": placement,
        "per_layer": {
            "breakdowns": result.get("breakdowns", []),
            "entities": result.get("entities", []),
            "entity_kinds": result.get("entity_kinds", []),
        },
        "mlia_warnings": list(result.get("warnings") or []),
        "mlia_advice": [a.get("message") for a in result.get("advice") or []],
        "artifacts_dir": str(artifacts_dir) if artifacts_dir else None,
        "raw": doc,
    }
    out["warnings"] = _np_warnings(out, values)
    return out


def _single_result(doc: dict[str, Any]) -> dict[str, Any]:
    results = [r for r in doc.get("results", []) if r.get("kind") == "performance" and r.get("producer") == "vela"]
    if len(results) != 1:
        raise ValueError(f"expected one vela performance result, got {len(results)}")
    return dict(results[0])


def _vela_backend(doc: dict[str, Any]) -> dict[str, Any]:
    return next((dict(b) for b in doc.get("backends", []) if b.get("id") == "vela"), {})


def _metric(m: dict[str, Any]) -> dict[str, Any]:
    """Keep name/value/unit exactly; keep availability/reason when MLIA marks a metric unavailable."""
    kept = {"name": m["name"], "value": m.get("value"), "unit": m.get("unit")}
    for extra in ("availability", "reason", "qualifiers"):
        if extra in m:
            kept[extra] = m[extra]
    return kept


def placement_summary(result: dict[str, Any]) -> dict[str, Any]:
    """Count Vela layers (rows of the per-layer table) by placement. CPU rows only occur for .tflite input."""
    entities = {e["id"]: e for e in result.get("entities", [])}
    counts = {"NPU": 0, "CPU": 0, "UNKNOWN": 0}
    cpu_ops: list[dict[str, Any]] = []
    for row in result.get("breakdowns", []):
        entity = entities.get(row.get("entity_id"), {})
        where = str(entity.get("placement", "UNKNOWN")).upper()
        counts[where if where in counts else "UNKNOWN"] += 1
        if where == "CPU":
            cpu_ops.append({"name": entity.get("name"), "layer_name": entity.get("attributes", {}).get("layer_name")})
    return {
        "unit": "vela layer (per-layer table row, after Vela fusion)",
        "npu": counts["NPU"],
        "cpu": counts["CPU"],
        "unknown": counts["UNKNOWN"],
        "cpu_ops": cpu_ops,
        "cpu_op_names": sorted({str(op["name"]) for op in cpu_ops}),
    }


def memory_summary(values: dict[str, Any], summary_csv: dict[str, Any], profile: dict[str, Any]) -> dict[str, Any]:
    """Footprint per memory area (bytes). The areas are distinct memories, so the honest total is their sum."""
    areas = {area: float(values.get(name) or 0.0) for area, name in MEMORY_AREAS}
    return {
        **{f"{area}_bytes": v for area, v in areas.items()},
        "total_bytes": sum(areas.values()),
        "weights_area": summary_csv.get("weights_storage_area"),
        "feature_map_area": summary_csv.get("feature_map_storage_area"),
        "sram_cache_limit_bytes": profile.get("arena_cache_size_bytes"),  # vela.ini; set for Dedicated_Sram
        "model_weight_memory_bytes": values.get("model_weight_memory"),
        "peak_activation_memory_bytes": values.get("peak_activation_memory"),
    }


_SUMMARY_FIELDS = (
    "accelerator_configuration",
    "system_config",
    "memory_mode",
    "core_clock",
    "arena_cache_size",
    "weights_storage_area",
    "feature_map_storage_area",
    "passes_before_fusing",
    "passes_after_fusing",
)


def _vela_summary_csv(artifacts_dir: Path | None) -> dict[str, Any]:
    """Fields of Vela's summary CSV that MLIA's JSON leaves out (storage areas, clock)."""
    if artifacts_dir is None or not artifacts_dir.is_dir():
        return {}
    found = sorted(artifacts_dir.glob("*_summary_*.csv"))
    if not found:
        return {}
    with open(found[0], encoding="utf-8") as f:
        row = next(csv.DictReader(f), {})
    return {k: row.get(k) for k in _SUMMARY_FIELDS if k in row} | {"file": found[0].name}


def _np_warnings(out: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """Conditions the user must see: the numbers are partial or meaningless."""
    notes = []
    if not values.get("total_cycles"):
        notes.append(
            "zero_cycles: Vela placed no work on the NPU (total_cycles == 0); latency/throughput are not an "
            "estimate. Typical cause: a float (unquantized) model."
        )
    placement = out["placement"]
    if placement["cpu"]:
        notes.append(
            f"cpu_fallback: {placement['cpu']} of {placement['npu'] + placement['cpu']} layers run on the CPU "
            f"({', '.join(placement['cpu_op_names'])}); MLIA's figures cover the NPU part only."
        )
    if out.get("status") != "ok":
        notes.append(f"status: MLIA result status is {out.get('status')!r}")
    return notes


def _add_pt2_facts(result: dict[str, Any], model: Path, artifacts_dir: Path) -> None:
    """For float .pt2 input: how MLIA quantized it, and partitions it silently left out."""
    if model.suffix.lower() != ".pt2":
        return
    leftovers = sorted(str(p) for p in (artifacts_dir / "tosa_simple").glob("output_tag*.tosa"))
    converted = artifacts_dir / f"{model.stem}.tosa"
    result["pt2"] = {
        "quantization": PT2_QUANTIZATION_NOTE,
        "converted_tosa": str(converted) if converted.is_file() else None,
        "dropped_partitions": leftovers,
    }
    if leftovers:
        result["warnings"].append(
            f"dropped_partitions: the model lowered to {len(leftovers) + 1} TOSA partitions but MLIA estimated "
            f"only output_tag0; not counted: {[Path(p).name for p in leftovers]}. Ops between partitions run on "
            "the CPU and are not reported either."
        )


# --------------------------------------------------------------------------- target profile facts


def profile_info(target_profile: str | Path) -> dict[str, Any]:
    """Facts MLIA derives from the target profile TOML and its vela.ini (mlia/resources/...)."""
    from mlia.target.registry import profile  # lazy; cheap, no torch

    cfg = profile(target_profile)
    options = getattr(cfg, "compiler_options", None)
    init = cfg.resolved_compiler_config  # parses vela.ini for system_config + memory_mode
    return {
        "profile_name": getattr(cfg, "profile_name", str(target_profile)),
        "target": cfg.target,
        "mac": getattr(cfg, "mac", None),
        "accelerator_config": getattr(options, "accelerator_config", None),
        "system_config": init.system_config,
        "memory_mode": init.memory_mode,
        "core_clock_hz": init.core_clock,
        "axi0_port": init.axi0_port,
        "axi1_port": init.axi1_port,
        "const_mem_area": init.const_mem_area,
        "arena_mem_area": init.arena_mem_area,
        "cache_mem_area": init.cache_mem_area,
        "arena_cache_size_bytes": init.arena_cache_size,
        "vela_ini": getattr(options, "config_file", None),
    }
