"""The one JSON document, assembled from the worker's events: the same assembly whether the events crossed a pipe
(supervisor) or stayed in this process (--no-guard)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from .host import host_info
from .options import Options, config_section
from .protocol import SCHEMA, Json, now_stamp


def log_tail(text: str, n: int = 40) -> List[str]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-n:]


def _planned_memory(plan: Json) -> Json:
    return {
        "activation_arena_bytes": plan["planned_arena_bytes"],
        "non_const_buffer_sizes": plan["non_const_buffer_sizes"],
        "source": "execution_plan[%s].non_const_buffer_sizes of the .pte flatbuffer; "
                  "entry 0 is reserved, the arena is the sum of the others; XNNPACK's own "
                  "workspace and packed weights are not included" % plan["name"],
    }


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def _results(doc: Json, o: Options, warm: List[float], samples: List[float], end: Optional[Json],
             extra_partial_reason: Optional[str]) -> None:
    """The sections of a successful (maybe partial) measurement."""
    doc["warmup_ms"] = warm
    doc["samples_ms"] = samples
    doc["warmup_asked"] = o.warmup
    doc["warmup_done"] = len(warm)
    doc["runs_asked"] = o.runs
    doc["runs_done"] = len(samples)
    if end is not None:
        doc["partial"] = end["partial"]
        doc["partial_reason"] = end["partial_reason"]
        doc["measure_ms"] = end["measure_ms"]
        doc["memory"] = end["memory"]
        doc["outputs"] = end["outputs"]
    else:  # the supervisor stopped a hung worker
        doc["partial"] = True
        doc["partial_reason"] = extra_partial_reason
        doc["memory"] = {"available": False, "reason": "the worker was stopped before it could report memory"}
    if samples:
        doc["quick"] = {"median_ms": _median(samples), "min_ms": min(samples),
                        "note": "use stats.summarize on samples_ms for the full summary"}


def assemble(o: Options, events: Sequence[Json], started: Json, error: Optional[Json] = None,
             runtime_log: Optional[List[str]] = None, extra_partial_reason: Optional[str] = None) -> Json:
    doc: Json = {"schema": SCHEMA, "ok": error is None}
    doc["config"] = config_section(o)
    warm: List[float] = []
    samples: List[float] = []
    end = None
    warnings: List[Any] = []
    for ev in events:
        k = ev.get("ev")
        if k == "w":
            warm.append(ev["ms"])
        elif k == "s":
            samples.append(ev["ms"])
        elif k == "model":
            doc["model"] = ev["model"]
            plans = ev["model"].get("pte", {}).get("execution_plans", [])
            plan = next((p for p in plans if p["name"] == o.method), None)
            if plan is not None:
                doc["planned_memory"] = _planned_memory(plan)
        elif k == "runtime":
            doc["runtime"] = ev["runtime"]
            doc.setdefault("load", {})["import_ms"] = ev["import_ms"]
        elif k == "loaded":
            doc.setdefault("load", {}).update(ev["load"])
            doc["inputs"] = ev["inputs"]
            doc["expected_inputs"] = ev["expected_inputs"]
            warnings += ev["warnings"]
        elif k == "end":
            end = ev
        elif k == "trace":
            doc["trace"] = ev["trace"]
    doc["host"] = host_info()
    if error is None:
        _results(doc, o, warm, samples, end, extra_partial_reason)
    else:
        doc["error"] = error
        if warm or samples:
            doc["warmup_ms"], doc["samples_ms"] = warm, samples
    if warnings:
        doc["warnings"] = warnings
    ts = {"start": started, "end": now_stamp()}
    if end is not None:
        ts["measure_start"], ts["measure_end"] = end["measure_start"], end["measure_end"]
    doc["timestamps"] = ts
    if runtime_log is not None:
        doc["runtime_log"] = runtime_log
    return doc
