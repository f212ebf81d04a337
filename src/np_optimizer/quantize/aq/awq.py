"""AWQ, activation-aware weight quantization (Lin et al., 2024).

1. Scale search: torchao's `torchao.prototype.awq.core.AWQObserver` — per input channel s = mean|X|^r (normalized),
   r on a grid of 20 in [0, 1), keeping the s whose quantized layer `linear(X / s, Q(W * s))` is nearest the float
   output. Its quantizer is np's (`scheme.fake_quantize_weight`), plugged in as a torchao base config, so the search
   sees the exact int4/int8 grid and group size the layer will get.
2. Clip search (`parameters.clip`, np's implementation of llm-awq's `auto_clip_layer`): per output channel and
   group, shrink the range to a ratio in [0.5, 1] that minimizes the group's output error on 512 calibration rows.
   As in llm-awq, q/k projections are not clipped.

Why not torchao's `AWQConfig` end to end: its convert step needs a weight tensor subclass with `act_pre_scale`
(`Int4Tensor`, which needs the CUDA-only `mslk` package, or `Int8Tensor`, which exports to `aten._int_mm` that
ExecuTorch cannot lower; measured with torchao 0.18 / ExecuTorch 1.4.1). The equalization 1/s is applied instead
as an explicit per-channel multiply in front of an XNNPACK-lowerable quantized linear (modules.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torchao.core.config import AOBaseConfig
from torchao.quantization.transform_module import register_quantize_module_handler
from torchao.utils import DummyModule

from np_optimizer.quantize.aq.registry import LayerInput, LayerQuant, register_algorithm
from np_optimizer.quantize.aq.scheme import (
    WeightQuant,
    _absmax_to_scale,
    fake_quantize_weight,
    quantize_weight,
    weight_scale,
)

__all__ = ["awq", "auto_clip"]

_NO_CLIP = ("q_proj", "k_proj", "query", "key", "Wqkv", "qkv")


@dataclass
class NpFakeQuantConfig(AOBaseConfig):  # type: ignore[misc]  # torchao ships no type information
    """A torchao base config whose handler rounds a weight with np's quantizer and returns it in float."""

    wq: WeightQuant


@register_quantize_module_handler(NpFakeQuantConfig)  # type: ignore[untyped-decorator]  # torchao is untyped
def _fake_quant(module: torch.nn.Module, config: NpFakeQuantConfig) -> torch.nn.Module:
    weight = cast(torch.Tensor, module.weight)  # AWQObserver passes a DummyModule holding the weight tensor
    return cast(torch.nn.Module, DummyModule(fake_quantize_weight(weight, config.wq)))


def auto_clip(weight: torch.Tensor, inputs: torch.Tensor, wq: WeightQuant, *, grid: int = 20,
              tokens: int = 512) -> torch.Tensor:
    """Per [out, group] the clipped absmax (ratio 1.0 down to 0.5 of the full one) of least output error."""
    out_features, in_features = weight.shape
    block = wq.block(int(in_features))
    groups = in_features // block
    if inputs.shape[0] > tokens:
        inputs = inputs[torch.linspace(0, inputs.shape[0] - 1, tokens).round().long()]
    x = inputs.reshape(-1, groups, block).permute(1, 0, 2)  # [groups, n, block]
    w = weight.reshape(out_features, groups, block)
    full = w.abs().amax(-1, keepdim=True)  # [out, groups, 1]
    reference = torch.bmm(x, w.permute(1, 2, 0))  # per-group partial outputs [groups, n, out]
    best = full.clone()
    best_err = torch.full(full.shape, float("inf"))
    for ratio in (1.0 - 0.5 * i / grid for i in range(grid)):
        absmax = full * ratio
        scale = _absmax_to_scale(absmax, wq)
        q = torch.clamp(torch.round(torch.clamp(w, -absmax, absmax) / scale), wq.qmin, wq.qmax) * scale
        err = (torch.bmm(x, q.permute(1, 2, 0)) - reference).pow(2).mean(1)  # [groups, out]
        err = err.t().unsqueeze(-1)
        better = err < best_err
        best = torch.where(better, absmax, best)
        best_err = torch.where(better, err, best_err)
    return best.squeeze(-1)


@register_algorithm("AWQ")
def awq(layer: LayerInput) -> LayerQuant:
    from torchao.prototype.awq.core import AWQObserver

    weight, inputs = layer.weight, layer.stats.inputs
    observer = AWQObserver(weight, layer.bias, NpFakeQuantConfig(layer.wq), layer.params.awq_grid)
    observer.inputs = [inputs]
    with torch.no_grad():
        scales = observer.calculate_qparams().float()
    scales = torch.where(torch.isfinite(scales) & (scales > 0), scales, torch.ones_like(scales))
    scaled = weight * scales.unsqueeze(0)
    info: dict[str, object] = {"scale_min": round(float(scales.min()), 4), "scale_max": round(float(scales.max()), 4)}
    clip = layer.params.clip and not any(key in layer.name.rsplit(".", 1)[-1] for key in _NO_CLIP)
    if clip:
        absmax = auto_clip(scaled, inputs / scales.unsqueeze(0), layer.wq, grid=layer.params.awq_clip_grid,
                           tokens=layer.params.awq_clip_tokens)
        full = scaled.abs().reshape(absmax.shape[0], absmax.shape[1], -1).amax(-1)
        scale = _absmax_to_scale(absmax, layer.wq)
        if layer.wq.group_size is None:
            scale = scale.squeeze(1)
        info["clip_ratio_mean"] = round(float((absmax / full.clamp(min=1e-12)).mean()), 4)
    else:
        scale = weight_scale(scaled, layer.wq)
        info["clip"] = "off" if not layer.params.clip else "skipped (q/k projection, as llm-awq)"
    identity = bool(torch.all(scales == 1.0))  # the search kept ratio 0: no equalization, no multiply
    return LayerQuant(quantize_weight(scaled, scale, layer.wq), scale, smooth=None if identity else 1.0 / scales,
                      info=info)
