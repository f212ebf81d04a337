"""The one dispatch point: algorithm name -> a function that quantizes one Linear layer.

    @register_algorithm("RTN")   # and a row in quantize/aq/catalog.py
    def rtn(layer: LayerInput) -> LayerQuant: ...

An algorithm sees one layer (its float weight, the calibration statistics of its input, the weight quantizer of the
scheme) and returns the integer weights, their scales, and optionally an input equalization vector `smooth` (the
layer then computes `linear(x * smooth, W)`, so an algorithm that scales weight column j by s_j sets smooth_j =
1/s_j). Everything else — calibration, activation quantization, the module swap, export — is shared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from np_optimizer.quantize.aq.calibrate import LinearStats
from np_optimizer.quantize.aq.catalog import ALGORITHMS
from np_optimizer.quantize.aq.scheme import AQScheme, WeightQuant
from np_optimizer.registry import Registry

__all__ = ["AQParams", "LayerInput", "LayerQuant", "Algorithm", "register_algorithm", "get_algorithm"]


@dataclass(frozen=True)
class AQParams:
    """Algorithm knobs. `clip` comes from run.detail.yaml (`parameters.clip`); the rest are the published defaults."""

    clip: bool = True
    awq_grid: int = 20  # AWQ: ratios tried for the activation-aware scale (torchao's scale_search_space_size)
    awq_clip_grid: int = 20  # AWQ: clip ratios tried per group (llm-awq's auto_clip: 1.0 down to 0.5)
    awq_clip_tokens: int = 512  # AWQ: input rows used by the clip search (llm-awq's n_sample_token)
    smoothquant_alpha: float = 0.5  # SmoothQuant's migration strength
    gptq_percdamp: float = 0.01  # GPTQ: diagonal dampening, as a fraction of the mean Hessian diagonal
    gptq_block: int = 128  # GPTQ: columns per lazy batch update
    gptq_act_order: bool = True  # GPTQ: columns in order of decreasing Hessian diagonal, with static groups
    autoround_iters: int = 200  # AutoRound: signed-gradient steps per layer (the paper's default)
    autoround_lr: float | None = None  # AutoRound: step size; None = 1 / iters (the paper's default)
    autoround_batch: int = 512  # AutoRound: input rows per step
    seed: int = 0


@dataclass
class LayerInput:
    name: str
    weight: torch.Tensor  # float32 [out, in]
    bias: torch.Tensor | None
    stats: LinearStats
    wq: WeightQuant  # the weight quantizer for this layer (the scheme's, or per-channel when a group does not fit)
    scheme: AQScheme
    params: AQParams


@dataclass
class LayerQuant:
    qweight: torch.Tensor  # int8 storage, values in [wq.qmin, wq.qmax], [out, in]
    scale: torch.Tensor  # [out] per channel or [out, in / group]
    smooth: torch.Tensor | None = None  # multiplier on the layer's input, [in]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    name: str
    quantize_layer: Callable[[LayerInput], LayerQuant]
    implementation: str  # where it comes from: torchao's code, or np's implementation of the published method
    needs_hessian: bool = False


# Each algorithm's module is named after it in lower case (RTN: rtn.py), so running one imports only its module;
# unknown names fail with NP-AQ-422.
_FUNCTIONS: Registry[Callable[[LayerInput], LayerQuant]] = Registry(
    "advanced_quantize algorithm", package="np_optimizer.quantize.aq", code="NP-AQ-422", module_of=str.lower)


def register_algorithm(name: str) -> Callable[[Callable[[LayerInput], LayerQuant]], Callable[[LayerInput], LayerQuant]]:
    """Register the function that quantizes one Linear layer for `name`, a row of quantize/aq/catalog.py."""
    if name not in ALGORITHMS:
        raise ValueError(f"advanced_quantize algorithm {name!r} has no row in quantize/aq/catalog.py")

    def register(function: Callable[[LayerInput], LayerQuant]) -> Callable[[LayerInput], LayerQuant]:
        return _FUNCTIONS.register(name, function)

    return register


def get_algorithm(name: str) -> Algorithm:
    """The catalogue row `name` with the function its module registered."""
    function = _FUNCTIONS.get(name)
    spec = ALGORITHMS[name]
    return Algorithm(name, function, spec.implementation, spec.needs_hessian)
