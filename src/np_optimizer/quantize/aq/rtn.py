"""RTN: round to nearest, with torchao's quantization primitives.

Scales come from `scheme.weight_scale` (torchao's `choose_qparams_affine` for MINMAX, a clipped range for PERCENTILE
and HISTOGRAM) and values from torchao's `quantize_affine`: the numerics of torchao's
`Int8DynamicActivationIntxWeightConfig` (symmetric, int8 storage). The baseline the other algorithms are measured
against.
"""

from __future__ import annotations

from np_optimizer.quantize.aq.registry import LayerInput, LayerQuant, register_algorithm
from np_optimizer.quantize.aq.scheme import quantize_weight, weight_scale

__all__ = ["rtn"]


@register_algorithm("RTN")
def rtn(layer: LayerInput) -> LayerQuant:
    scale = weight_scale(layer.weight, layer.wq)
    return LayerQuant(quantize_weight(layer.weight, scale, layer.wq), scale)
