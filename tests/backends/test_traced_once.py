"""backends/traced_once.py: XNNPACK's pattern graphs traced once in the sweep's warm host. The fork after the traces
stays safe (a child's parallel region runs: GNU OpenMP's pool is never started in the parent), and the quantizer's
remembered conv-bn patterns give the same quantized program as tracing them again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

from np_optimizer.backends.traced_once import remember_conv_bn_patterns

# The parent traces with torch as the warm host does (a parallel-sized op inside in_one_thread), then forks; the
# child runs parallel ops with 2 threads. Were an OpenMP pool started in the parent, the child would hang (seen with
# this torch's libgomp when the op runs outside in_one_thread).
FORK_AFTER_TRACE = textwrap.dedent("""
    import os, sys, torch
    from np_optimizer.backends.traced_once import in_one_thread, native_threads

    before = native_threads()
    in_one_thread(lambda: (torch.randn(64, 256, 256) @ torch.randn(64, 256, 256)).sum())
    assert native_threads() == before and torch.get_num_threads() == 2, (before, native_threads())
    pid = os.fork()
    if pid == 0:
        z = torch.randn(64, 256, 256)
        (z @ z).sum()
        os._exit(0)
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
""")


def test_a_child_forked_after_the_traces_runs_parallel_ops() -> None:
    # both variables: torch takes the smaller (scripts/test.sh exports MKL_NUM_THREADS=1 as well)
    done = subprocess.run([sys.executable, "-c", FORK_AFTER_TRACE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


# In a fresh interpreter: a pytest worker's own threads (a pool's, a server's from an earlier test) may end while the
# check waits, and hide the one the trace left
THREAD_LEFT = textwrap.dedent("""
    import threading, torch
    from np_optimizer.backends.traced_once import in_one_thread

    stop = threading.Event()
    state = torch.random.get_rng_state()
    try:
        in_one_thread(lambda: (threading.Thread(target=stop.wait, daemon=True).start(), torch.randn(3)))
    except RuntimeError as exc:
        print(exc)
    finally:
        stop.set()
    print(torch.equal(torch.random.get_rng_state(), state))  # the trace's draws are not the trials'
""")


def test_a_trace_that_leaves_a_thread_running_is_refused() -> None:
    done = subprocess.run([sys.executable, "-c", THREAD_LEFT], capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 2, done.stdout + done.stderr[-2000:]
    assert "left 1 thread" in lines[0] and lines[1] == "True", lines


class _ConvBn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
        self.up, self.bn2 = torch.nn.ConvTranspose2d(4, 2, 2), torch.nn.BatchNorm2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.up(torch.relu(self.bn(self.conv(x)))))


def _quantized(x: torch.Tensor) -> tuple[str, torch.Tensor]:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    model = torch.export.export(_ConvBn().eval(), (x,)).module()
    prepared = prepare_pt2e(model, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    prepared(x)
    converted = convert_pt2e(prepared)
    return str(converted.graph), converted(x)


def test_remembered_conv_bn_patterns_quantize_as_traced_ones() -> None:
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    original = utils._get_aten_graph_module_for_pattern
    traced = []

    def counted(*args: object, **kwargs: object) -> object:
        traced.append(1)
        return original(*args, **kwargs)

    try:
        utils._get_aten_graph_module_for_pattern = counted
        fresh = _quantized(x)
        first = len(traced)
        remember_conv_bn_patterns()
        again = [_quantized(x) for _ in range(2)]
    finally:
        utils._get_aten_graph_module_for_pattern = original
    assert first >= 4 and len(traced) == 2 * first  # the first quantization traced them; the second reused them
    for graph, output in again:
        assert graph == fresh[0] and torch.equal(output, fresh[1])
