"""The quantized Linear every advanced_quantize algorithm produces, written in the ops XNNPACK lowers.

Its forward is the PT2E reference representation (the `quantized_decomposed` q/dq ops that `convert_pt2e` writes and
ExecuTorch's XNNPACK partitioner fuses into one quantized fully-connected kernel):

    x = x * smooth                                   (AWQ / SmoothQuant equalization, when there is one)
    x = dq(q(x))                                     int8 activations: dynamic per token / per tensor, or static
    w = dequantize_per_channel[_group](qweight, ...) int8 or int4 weights (int8 storage), symmetric
    y = linear(x, w, bias)
    y = dq(q(y))                                     static scheme only: XNNPACK's static kernel has int8 outputs

Measured with ExecuTorch 1.4.1: every form below lowers to XNNPACK with no op left outside the delegate (int8
per-channel static/dynamic, int4 per-channel/per-group dynamic); 8-bit grouped weights do not ("Only 4b group
quantization is supported"), which `scheme.build_scheme` prevents. Plain int8 buffers (no tensor subclass) keep the
.pt2 loadable anywhere and let graph_quantize, the stats and the report read the layer like a PT2E-quantized one.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from np_optimizer.adapters.torch_private import register_quantized_decomposed
from np_optimizer.quantize.aq.scheme import ActivationQuant, WeightQuant

register_quantized_decomposed()  # torch.ops.quantized_decomposed, used below

__all__ = ["QuantizedLinear"]

_qd = torch.ops.quantized_decomposed
_EPS = float(torch.finfo(torch.float32).eps)


class QuantizedLinear(nn.Module):
    def __init__(self, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, weight: WeightQuant,
                 activation: ActivationQuant, *, smooth: torch.Tensor | None = None,
                 input_qparams: tuple[float, int] | None = None,
                 output_qparams: tuple[float, int] | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = int(qweight.shape[0]), int(qweight.shape[1])
        self.bits, self.qmin, self.qmax = weight.bits, weight.qmin, weight.qmax
        self.group_size = weight.group_size
        self.mode, self.granularity = activation.mode, activation.granularity
        self.register_buffer("qweight", qweight.to(torch.int8).contiguous())
        self.register_buffer("weight_scale", scale.float().contiguous())
        self.register_buffer("weight_zero_point", torch.zeros(scale.shape, dtype=torch.int64))
        self.bias = nn.Parameter(bias.detach().float().clone(), requires_grad=False) if bias is not None else None
        if smooth is not None:
            self.register_buffer("smooth", smooth.float().reshape(-1).contiguous())
        else:
            self.smooth = None
        if self.mode == "static" and (input_qparams is None or output_qparams is None):
            raise ValueError("a static QuantizedLinear needs input and output qparams")
        self.input_qparams = input_qparams
        self.output_qparams = output_qparams

    def dequantized_weight(self) -> torch.Tensor:
        # torch.ops.* calls are typed as returning Any
        if self.group_size:
            return cast(torch.Tensor, _qd.dequantize_per_channel_group(
                self.qweight, self.weight_scale, self.weight_zero_point, self.qmin, self.qmax, torch.int8,
                self.group_size, torch.float32))
        return cast(torch.Tensor, _qd.dequantize_per_channel(self.qweight, self.weight_scale, self.weight_zero_point,
                                                             0, self.qmin, self.qmax, torch.int8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.smooth is not None:
            x = x * self.smooth
        if self.mode == "static":
            assert self.input_qparams is not None and self.output_qparams is not None
            scale, zp = self.input_qparams
            x = _qd.dequantize_per_tensor(_qd.quantize_per_tensor(x, scale, zp, -128, 127, torch.int8),
                                          scale, zp, -128, 127, torch.int8)
        elif self.granularity == "TOKEN":
            scale_t, zp_t = _qd.choose_qparams_per_token_asymmetric(x, torch.int8)
            x = _qd.dequantize_per_token(_qd.quantize_per_token(x, scale_t, zp_t, -128, 127, torch.int8),
                                         scale_t, zp_t, -128, 127, torch.int8, torch.float32)
        else:
            scale_t, zp_t = _qd.choose_qparams.tensor(x, -128, 127, _EPS, torch.int8)
            x = _qd.dequantize_per_tensor.tensor(_qd.quantize_per_tensor.tensor(x, scale_t, zp_t, -128, 127,
                                                                                torch.int8),
                                                 scale_t, zp_t, -128, 127, torch.int8)
        y = F.linear(x, self.dequantized_weight(), self.bias)
        if self.mode == "static":
            assert self.output_qparams is not None
            scale, zp = self.output_qparams
            y = _qd.dequantize_per_tensor(_qd.quantize_per_tensor(y, scale, zp, -128, 127, torch.int8),
                                          scale, zp, -128, 127, torch.int8)
        return y

    def extra_repr(self) -> str:
        where = f"group_size={self.group_size}" if self.group_size else "per_channel"
        act = "static" if self.mode == "static" else f"dynamic_{self.granularity.lower()}"
        return (f"in_features={self.in_features}, out_features={self.out_features}, int{self.bits} {where}, "
                f"activation={act}, smooth={self.smooth is not None}, bias={self.bias is not None}")
