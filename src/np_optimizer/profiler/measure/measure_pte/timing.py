"""Warm-up and timed runs, bounded by the timeout. What is timed: each `method(inputs)` call (the same call as
`executorch.runtime.Method.execute`) with time.perf_counter_ns around it and nothing else inside the timed region.
Each sample leaves as an event at once, so a supervisor that has to kill a hung call still has the samples before
it."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .protocol import Emitter, Json, MeasureError, now_stamp


@dataclass
class Runs:
    warmup_done: int
    runs_done: int
    partial: bool
    partial_reason: Optional[str]
    last_outputs: Any  # what the last call returned, None when no call finished
    measure_ms: float
    measure_start: Json


def timed_runs(method: Any, inputs: Sequence[Any], *, warmup: int, runs: int, timeout: float, em: Emitter) -> Runs:
    """Call `method` warmup + runs times, sending events "w" and "s" (ms); stop early, partial, when the timeout
    expires. A call that raises is execute_failed."""
    gc_was = gc.isenabled()
    gc.disable()  # no collector pause inside a timed call
    clock = time.perf_counter_ns
    timeout_ns = int(timeout * 1e9)
    m_start = now_stamp()
    t_begin = clock()
    deadline = t_begin + timeout_ns
    partial, reason = False, None
    warm_done = runs_done = 0
    out = None
    try:
        for _ in range(warmup):
            a = clock()
            out = method(inputs)
            b = clock()
            warm_done += 1
            em.emit({"ev": "w", "ms": (b - a) / 1e6})
            if b >= deadline:
                partial, reason = True, "timeout of %g s expired during warm-up" % timeout
                break
        if not partial:
            for _ in range(runs):
                a = clock()
                out = method(inputs)
                b = clock()
                runs_done += 1
                em.emit({"ev": "s", "ms": (b - a) / 1e6})
                if b >= deadline and runs_done < runs:
                    partial, reason = True, "timeout of %g s expired" % timeout
                    break
    except Exception as e:
        raise MeasureError("execute_failed", "%s: %s" % (type(e).__name__, e),
                           warmup_done=warm_done, runs_done=runs_done)
    finally:
        if gc_was:
            gc.enable()
    t_end = clock()
    return Runs(warmup_done=warm_done, runs_done=runs_done, partial=partial, partial_reason=reason, last_outputs=out,
                measure_ms=(t_end - t_begin) / 1e6, measure_start=m_start)
