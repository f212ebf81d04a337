"""SmoothQuant (Xiao et al., 2023): move activation outliers into the weights before quantizing.

The smoothing factor s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) per input channel j comes from torchao's
`torchao.prototype.smoothquant.core.SmoothQuantObserver` (alpha 0.5). The layer then computes
`linear((x / s) quantized, (W * s) quantized)`.

Why not torchao's `SmoothQuantConfig` end to end: it stores 1/s as `act_pre_scale` on a weight tensor subclass that
supports it (`Int8Tensor`), and `Int8Tensor` exports to `aten._int_mm`, which is not Core ATen: ExecuTorch cannot
lower it (measured with torchao 0.18 / ExecuTorch 1.4.1). So np takes torchao's observer for the factor and applies
it as an explicit per-channel multiply in front of an XNNPACK-lowerable quantized linear (see modules.py).
"""

from __future__ import annotations

import torch

from np_optimizer.quantize.aq.registry import LayerInput, LayerQuant, register_algorithm
from np_optimizer.quantize.aq.scheme import quantize_weight, weight_scale

__all__ = ["smoothquant"]


@register_algorithm("SMOOTHQUANT")
def smoothquant(layer: LayerInput) -> LayerQuant:
    from torchao.prototype.smoothquant.core import SmoothQuantObserver

    weight = layer.weight
    observer = SmoothQuantObserver(weight, alpha=layer.params.smoothquant_alpha)
    # The observer only needs each channel's max |x| over the calibration set; one row of those maxima gives exactly
    # the factor it would compute from every input row.
    observer(layer.stats.channel_absmax.unsqueeze(0))
    factor, _scale, _zero_point = observer.calculate_qparams()
    factor = torch.where(torch.isfinite(factor) & (factor > 0), factor, torch.ones_like(factor))
    smoothed = weight * factor.unsqueeze(0)
    scale = weight_scale(smoothed, layer.wq)
    info = {"alpha": layer.params.smoothquant_alpha, "smooth_min": round(float(factor.min()), 4),
            "smooth_max": round(float(factor.max()), 4)}
    return LayerQuant(quantize_weight(smoothed, scale, layer.wq), scale, smooth=1.0 / factor, info=info)
