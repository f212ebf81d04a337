"""Benchmark: what the per-layer SNR adds to each job (target: a small fraction of the job's own SNR check).

A job already runs its checkpoint on the evaluation inputs for the SNR against INPUT_MODEL. With per-layer numerics
that run goes through a torch.fx Interpreter that keeps every layer's output (layers/numerics.py `tap`), then each
layer is compared with INPUT_MODEL's (`layer_snr`). This times, on the samples' model (small_cnn) and on a
ResNet-like model (3 stages of 2 residual blocks, BN after every conv, 64x64 input), for the GRAPH_QUANTIZE
checkpoint (XNNPACK W8-A8) on 8 inputs: the plain run the job did before, the tapped run, and the comparison.

    .venv/bin/python bench/layer_numerics.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _common  # noqa: E402,F401  (drops this folder from sys.path: bench/profile.py would shadow `profile`)


def resnet_like() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.bn = nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)
            self.layer1 = nn.Sequential(Block(32, 32, 1), Block(32, 32, 1))
            self.layer2 = nn.Sequential(Block(32, 64, 2), Block(64, 64, 1))
            self.layer3 = nn.Sequential(Block(64, 128, 2), Block(128, 128, 1))
            self.fc = nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.layer3(self.layer2(self.layer1(torch.relu(self.bn(self.stem(x))))))
            return self.fc(y.mean(dim=(2, 3)))

    torch.manual_seed(0)
    return ResNet().eval(), (torch.randn(1, 3, 64, 64),)


def main() -> int:
    import torch

    from np_optimizer.layers.lineage import module_map
    from np_optimizer.layers.numerics import layer_snr, tap
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"Per-layer SNR per job, GRAPH_QUANTIZE (XNNPACK W8-A8) on 8 inputs, median of {rounds}:")
    for name, (model, example) in (("small_cnn (the samples)", build_builtin("small_cnn")),
                                   ("ResNet-like, 64x64", resnet_like())):
        torch.manual_seed(1)
        inputs = [example] + [tuple(torch.randn_like(t) for t in example) for _ in range(7)]
        program = torch.export.export(model, example)
        quantized = quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None,
                                     calibration=inputs[:4], keep_float=frozenset())
        reference = tap(program, inputs)
        plain, tapped, compared = [], [], []
        for _ in range(rounds):
            start = time.perf_counter()
            with torch.no_grad():
                module = quantized.module()
                [module(*x) for x in inputs]
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            taps = tap(quantized, inputs)
            tapped.append(time.perf_counter() - start)
            start = time.perf_counter()
            rows = layer_snr(reference, taps, module_map(reference.graph, taps.graph))
            compared.append(time.perf_counter() - start)
        run, traced, diff = (statistics.median(x) for x in (plain, tapped, compared))
        print(f"  {name:<24} {len(rows)} layers: plain run {run:.3f} s, tapped run {traced:.3f} s, "
              f"per-layer SNR {diff:.3f} s: adds {traced + diff - run:+.3f} s per job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
