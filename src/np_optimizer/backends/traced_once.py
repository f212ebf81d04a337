"""What a backend's lowering traces again in every process (Backend.trace_once), traced once in the sweep's warm
trial host (sweep/host.py, through api/trial.py's `prime`) so that each trial forked from it starts with it. XNNPACK's
(`xnnpack_patterns`: 8 to 12 s a trial on the shared 2-core machine) are pattern graphs traced with torch.export:

- the lowering's bilinear-upsample and SDPA patterns (executorch's own lru_caches: filled here, inherited by a fork);
- the XNNPACK quantizer's 12 conv-bn[-relu] patterns (ExecuTorch traces them again in every static-scheme
  annotation, uncached): `remember_conv_bn_patterns()` puts a memo in front of the quantizer's trace, keyed by what the
  traced graph is made of (the pattern's code and the values it closes over, the example inputs' shapes and dtypes),
  and hands each caller its own deep copy (the matcher rewrites the pattern's output node).

Fork safety: these traces run torch ops. A GNU OpenMP pool used before a fork hangs the child's first parallel
region (the child has the pool's bookkeeping but not its threads), so `in_one_thread` runs them with torch's
intra-op threads at 1 (no parallel region, so no pool) and then puts the count back (omp_set_num_threads starts no
thread); it stops tqdm's monitor thread that torch.fx's interpreter starts, and checks that the process has no more
threads than before: a host that would fork with a new thread raises, and the pool falls back to fresh processes.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["in_one_thread", "xnnpack_patterns", "remember_conv_bn_patterns", "native_threads"]


def native_threads() -> int | None:
    """The process's threads as the kernel counts them (OpenMP's and BLAS's too); None where /proc is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _stop_tqdm_monitor() -> None:
    with contextlib.suppress(ImportError):
        from tqdm import tqdm

        monitor = getattr(tqdm, "monitor", None)
        if monitor is not None:
            monitor.exit()  # sets its event and joins it
            tqdm.monitor = None


def _settled(before: int | None, wait_s: float = 2.0) -> int | None:
    """The thread count once a thread that was told to end is gone: a joined thread leaves /proc a moment after its
    Python side ends (seen under load as one thread too many)."""
    deadline = time.monotonic() + wait_s
    while True:
        now = native_threads()
        if before is None or now is None or now <= before or time.monotonic() > deadline:
            return now
        time.sleep(0.01)


def in_one_thread(trace: Callable[[], None]) -> None:
    """Run a backend's `trace_once` in this process, which forks afterwards: one intra-op thread meanwhile, the thread
    count and the global random state restored, no thread left behind (RuntimeError otherwise, naming the count). A
    trace that fails is left to the trials (each traces it itself, as a fresh process does)."""
    import torch

    before = native_threads()
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    torch.set_num_threads(1)
    try:
        trace()
    except Exception:  # noqa: BLE001,S110 - an ExecuTorch whose patterns moved: each trial traces them itself
        pass
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)  # the example inputs' draws: a child starts from the state it had before
        _stop_tqdm_monitor()
    after = _settled(before)
    if before is not None and after is not None and after > before:
        raise RuntimeError(f"tracing the backend's patterns left {after - before} thread(s) running; a fork now could "
                           "hang its first parallel region")


def xnnpack_patterns() -> None:
    """The XNNPACK backend's `trace_once`: the lowering's bilinear and SDPA patterns, the quantizer's conv-bn ones.
    Traced as the compile traces the first two (inside its lowering): under lean_lowering, whose deferred code
    generation and shared provenance take 0.7 s off the 4.2 s here; the graphs are the same."""
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    from np_optimizer.adapters.torch_private import lean_lowering

    with lean_lowering():
        bilinear_2d.get_graphs_dict()
        sdpa.get_graphs()
        remember_conv_bn_patterns()
        _trace_conv_bn_patterns()


def _trace_conv_bn_patterns() -> None:
    """Every conv-bn pattern the quantizer's annotators trace, matched once against an empty graph."""
    import torch
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    graph = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    graph.graph.output(None)
    for has_relu in (False, True):
        for transpose in (False, True):
            utils._do_annotate_conv_bn(graph, None, None, has_relu=has_relu, is_conv_transpose=transpose)


def _key(pattern: Any, example_inputs: tuple[Any, ...], is_cuda: bool, kwargs: dict[str, Any]) -> Hashable | None:
    """What the traced graph is made of; None when a part cannot be told by value (then nothing is remembered)."""
    import torch

    fn = getattr(pattern, "fn", None)
    code = getattr(fn, "__code__", None)
    if fn is None or code is None:
        return None
    try:
        closed = tuple(cell.cell_contents for cell in (getattr(fn, "__closure__", None) or ()))
        inputs = tuple((tuple(x.shape), x.dtype, x.device.type) if isinstance(x, torch.Tensor) else x
                       for x in example_inputs)
        key = (code, closed, inputs, is_cuda, tuple(sorted(kwargs.items())))
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def remember_conv_bn_patterns() -> None:
    """Put the memo in front of the XNNPACK quantizer's pattern trace (once per process)."""
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    trace: Callable[..., Any] = utils._get_aten_graph_module_for_pattern
    if getattr(trace, "np_remembers", False):
        return
    traced: dict[Hashable, Any] = {}

    def remembered(pattern: Any, example_inputs: tuple[Any, ...], is_cuda: bool = False, **kwargs: Any) -> Any:
        key = _key(pattern, example_inputs, is_cuda, kwargs)
        if key is None:
            return trace(pattern, example_inputs, is_cuda, **kwargs)
        if key not in traced:
            traced[key] = trace(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(traced[key])

    remembered.np_remembers = True  # type: ignore[attr-defined]
    utils._get_aten_graph_module_for_pattern = remembered
