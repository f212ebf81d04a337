"""One pass of the float model over the calibration samples, recording what enters and leaves every Linear.

Per layer: per-input-channel min/max (SmoothQuant's and static activation ranges), the output range (static
output scale), a bounded set of input rows (AWQ's search, AutoRound's reconstruction, the per-layer error report)
and, when asked, the sum of x^T x (GPTQ's Hessian). Every layer sees the float model's activations (layer-wise,
not sequential), as torchao's GPTQ does by default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = ["LinearStats", "collect_linear_stats"]

ROWS_CAP = 4096  # input rows kept per layer (spread evenly over the samples)


@dataclass
class LinearStats:
    in_features: int
    rows: list[torch.Tensor] = field(default_factory=list)
    channel_min: torch.Tensor | None = None
    channel_max: torch.Tensor | None = None
    out_min: float = math.inf
    out_max: float = -math.inf
    hessian: torch.Tensor | None = None  # sum of x^T x over every row seen
    count: int = 0  # rows seen

    @property
    def inputs(self) -> torch.Tensor:
        """The kept input rows, [n, in_features]."""
        return torch.cat(self.rows, 0) if self.rows else torch.zeros(0, self.in_features)

    @property
    def channel_absmax(self) -> torch.Tensor:
        assert self.channel_min is not None and self.channel_max is not None
        return torch.maximum(self.channel_min.abs(), self.channel_max.abs())


def collect_linear_stats(model: nn.Module, names: Sequence[str], samples: Sequence[tuple[Any, ...]], *,
                         hessian: bool = False, rows_cap: int = ROWS_CAP,
                         progress: Callable[[str], None] = lambda _t: None) -> dict[str, LinearStats]:
    modules = dict(model.named_modules())
    per_sample = max(1, math.ceil(rows_cap / max(len(samples), 1)))
    stats = {name: LinearStats(int(modules[name].in_features)) for name in names}

    def hook(name: str) -> Callable[..., None]:
        record = stats[name]

        def observe(_module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            x = args[0].detach().reshape(-1, record.in_features).float()
            lo, hi = x.amin(0), x.amax(0)
            record.channel_min = lo if record.channel_min is None else torch.minimum(record.channel_min, lo)
            record.channel_max = hi if record.channel_max is None else torch.maximum(record.channel_max, hi)
            record.out_min = min(record.out_min, float(output.detach().min()))
            record.out_max = max(record.out_max, float(output.detach().max()))
            if x.shape[0] > per_sample:
                index = torch.linspace(0, x.shape[0] - 1, per_sample).round().long()
                record.rows.append(x[index].clone())
            else:
                record.rows.append(x.clone())
            if hessian:
                h = x.t() @ x
                record.hessian = h if record.hessian is None else record.hessian + h
            record.count += int(x.shape[0])

        return observe

    handles = [modules[name].register_forward_hook(hook(name)) for name in names]
    try:
        with torch.no_grad():
            for index, sample in enumerate(samples, 1):
                if index == 1 or index % 16 == 0 or index == len(samples):
                    progress(f"calibrating {index}/{len(samples)}")
                model(*sample)
    finally:
        for handle in handles:
            handle.remove()
    return stats
