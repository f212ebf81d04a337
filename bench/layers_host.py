"""Benchmark: host per-op timing (ETDump + ExecuTorch's Inspector) against the untraced median, on a model with 1x1
convolutions, a pad and an op XNNPACK does not delegate (cumsum).

Prints the untraced median latency of the .pte (timed runs, no tracer), the sum of the per-op / per-delegate-call
medians of a traced pass, and their ratio: the per-layer view is trusted when the sum is within 10% of the median.

    .venv/bin/python bench/layers_host.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def main() -> int:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch
    from torch import nn

    from np_optimizer.errors import UnsupportedError
    from np_optimizer.layers.files import aggregate
    from np_optimizer.layers.host_ops import traced_ops

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.pad = nn.ZeroPad2d(1)
            self.expand = nn.Conv2d(16, 64, 1)
            self.project = nn.Conv2d(64, 16, 1)
            self.head = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.project(torch.relu(self.expand(self.pad(self.stem(x)))))
            return torch.cumsum(self.head(y.mean(dim=(2, 3))), dim=1)

    torch.manual_seed(0)
    example = (torch.randn(1, 3, 64, 64),)
    work = Path(tempfile.mkdtemp(prefix="np-bench-layers-"))
    edge = to_edge_transform_and_lower(torch.export.export(Net().eval(), example),
                                       partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    program = edge.to_executorch()
    (work / "model.pte").write_bytes(program.buffer)
    program.get_etrecord().save(str(work / "model.etrecord"))
    module = _load_for_executorch(str(work / "model.pte"))
    for _ in range(10):
        module.forward(list(example))
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        module.forward(list(example))
        samples.append((time.perf_counter() - start) * 1000)
    median = statistics.median(samples)
    print(f"untraced median: {median:.4f} ms over {runs} runs (ExecuTorch pybindings, this machine)")
    try:
        rows = traced_ops(work / "model.pte", work / "model.etrecord", example, runs, work)
    except UnsupportedError as exc:  # the pip runtime has no event tracer: no figure, and say why
        print(f"per-op figure not available: {exc.message} {exc.hint}")
        return 0
    per_op = sum(r["time_ms"] for r in rows)
    print(f"sum of per-op / per-delegate-call medians (traced, {runs} runs): {per_op:.4f} ms")
    print(f"ratio: {per_op / median:.3f} ({abs(per_op / median - 1) * 100:.1f}% from the untraced median; "
          "target within 10%)")
    for layer in aggregate(rows, "time_ms")[:8]:
        print(f"  {layer['key']:<24} {layer.get('class') or '-':<10} {layer['placement'] or '-':<22} "
              f"{layer['cost']:.4f} ms  {layer['share_pct']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
