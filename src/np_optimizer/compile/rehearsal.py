"""A rehearsal of the compile, for the sweep's warm trial host (sweep/host.py, through api/trial.py's `rehearse`): a
small CNN exported, quantized in each of the backend's schemes and lowered as the compile lowers, once, right after the
host forked its first trial. What torch and ExecuTorch build on their first call (decomposition and operator tables,
dispatch caches, lazy imports in torch.export, torchao's quantizer and ExecuTorch's passes) is then built in the host,
and every trial forked later starts with it instead of building it again.

Measured on sample_cpu (6 XNNPACK trials, each forked after the host traced the patterns, run on their own): 14.4 to
14.6 s for the six trials' np runs without the rehearsal, 12.5 to 12.6 s with it (the rehearsal: 4.2 to 5.0 s of the
host's CPU, on the core the first trial leaves). Nothing is written but a temporary folder; the programs are dropped.
It runs with torch at one intra-op thread (backends/traced_once.in_one_thread), so the host's later forks stay safe.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from np_optimizer.backends.base import Backend

__all__ = ["rehearse_lowering"]


def rehearse_lowering(backend: Backend) -> None:
    """A small CNN (conv, batch norm, ReLU, pooling, a residual add, linear) exported, quantized in each of the
    backend's schemes and lowered to a .pte in memory, as the compile lowers (lean_lowering)."""
    import torch

    from np_optimizer.adapters.torch_private import lean_lowering
    from np_optimizer.quantize.pt2e import quantize_program

    class SmallCnn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
            self.conv2, self.bn2 = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
            y = y + torch.relu(self.bn2(self.conv2(y)))
            out: torch.Tensor = self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))
            return out

    inputs = (torch.randn(1, 3, 8, 8),)
    program = torch.export.export(SmallCnn().eval(), inputs)
    with tempfile.TemporaryDirectory(prefix="np-rehearsal-") as work:
        for scheme in backend.scheme_names:
            quantized = quantize_program(program, backend=backend.name, scheme=scheme, target=None,
                                         calibration=[inputs])
            with lean_lowering():
                backend.lower(quantized, None, Path(work)).edge.to_executorch().buffer  # noqa: B018 - serialized
