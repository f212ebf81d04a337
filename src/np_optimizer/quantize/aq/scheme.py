"""What an advanced_quantize scheme means for weights and activations, and the weight quantizer every algorithm uses.

One config dataclass per concern (torchao style): `WeightQuant` (bits, group size, how ranges are chosen),
`ActivationQuant` (static or dynamic int8, per tensor or per token), `AQScheme` (the two, named as in run.yaml).
`build_scheme(name, options)` turns run.yaml's scheme plus run.detail.yaml's `advanced_quantize[0]` options into an
`AQScheme`, adjusting what XNNPACK cannot run and saying so:

    W8-A8           int8 weights per output channel, int8 activations with static per-tensor scales (calibrated)
    W8-A8_dynamic   int8 weights per output channel, int8 activations quantized at run time
    W4-A8_dynamic   int4 weights per output channel or per group of 32/64/128 inputs, int8 activations at run time

XNNPACK packs blockwise (grouped) weights only at 4 bits, so 8-bit schemes use per-channel weights; a static scale
cannot follow each token, so W8-A8 uses per-tensor activation scales. Weights are symmetric (zero point 0) in
[-127, 127] (8-bit, as the XNNPACK PT2E quantizer) or [-8, 7] (4-bit, as torchao's 8da4w); their scales come from
torchao's `choose_qparams_affine` (MINMAX) and values from torchao's `quantize_affine`, so RTN is torchao's RTN.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

__all__ = ["WeightQuant", "ActivationQuant", "AQScheme", "SCHEMES", "build_scheme", "weight_scale",
           "quantize_weight", "dequantize_weight", "fake_quantize_weight", "activation_qparams"]

WEIGHT_METHODS = ("MINMAX", "HISTOGRAM", "MOVING_AVERAGE_MINMAX", "PERCENTILE")
PERCENTILE = 0.999  # PERCENTILE clips each group's range at this quantile of |w|
HISTOGRAM_RATIOS = 20  # HISTOGRAM tries this many clip ratios in [0.5, 1] and keeps the one of least L2 error


@dataclass(frozen=True)
class WeightQuant:
    bits: int  # 4 or 8
    group_size: int | None  # None: one scale per output channel
    method: str = "MINMAX"

    @property
    def qmin(self) -> int:
        return -8 if self.bits == 4 else -127

    @property
    def qmax(self) -> int:
        return 7 if self.bits == 4 else 127

    def block(self, in_features: int) -> int:
        return self.group_size or in_features

    def describe(self) -> str:
        where = f"groups of {self.group_size}" if self.group_size else "per output channel"
        return f"int{self.bits} symmetric, {where}, {self.method}"


@dataclass(frozen=True)
class ActivationQuant:
    mode: str  # "static" | "dynamic"
    granularity: str  # "TENSOR" | "TOKEN"
    method: str = "MINMAX"

    def describe(self) -> str:
        if self.mode == "static":
            return "int8 static per-tensor (asymmetric, calibrated MINMAX)"
        return f"int8 dynamic per-{self.granularity.lower()} (asymmetric)"


@dataclass(frozen=True)
class AQScheme:
    name: str
    weight: WeightQuant
    activation: ActivationQuant

    def parameters(self) -> dict[str, Any]:
        """What job.json's parameters say of the scheme."""
        return {"scheme": self.name, "weight": self.weight.describe(), "activation": self.activation.describe(),
                "weight_bits": self.weight.bits, "weight_group_size": self.weight.group_size,
                "weight_calibration_method": self.weight.method, "activation_mode": self.activation.mode,
                "activation_granularity": self.activation.granularity}


SCHEMES: dict[str, AQScheme] = {
    "W8-A8": AQScheme("W8-A8", WeightQuant(8, None), ActivationQuant("static", "TENSOR")),
    "W8-A8_dynamic": AQScheme("W8-A8_dynamic", WeightQuant(8, None), ActivationQuant("dynamic", "TOKEN")),
    "W4-A8_dynamic": AQScheme("W4-A8_dynamic", WeightQuant(4, 32), ActivationQuant("dynamic", "TOKEN")),
}


def build_scheme(name: str, options: dict[str, Any]) -> tuple[AQScheme, list[dict[str, str]]]:
    """The scheme with run.detail.yaml's options applied, and the adjustments made (option, asked, used, why)."""
    base = SCHEMES[name]
    weight_opts = options.get("weight", {})
    act_opts = options.get("activation", {})
    adjustments: list[dict[str, str]] = []
    granularity = str(weight_opts.get("granularity", "GROUP")).upper()
    group_size = int(weight_opts.get("group_size", 32))
    method = str(weight_opts.get("calibration_method", "MINMAX")).upper()
    weight = replace(base.weight, method=method)
    if granularity == "CHANNEL":
        weight = replace(weight, group_size=None)
    elif base.weight.bits == 4:
        weight = replace(weight, group_size=group_size)
    else:
        adjustments.append({"option": "weight.granularity", "asked": f"GROUP ({group_size})", "used": "CHANNEL",
                            "why": "XNNPACK packs grouped weights at 4 bits only; 8-bit weights use one scale per "
                                   "output channel"})
    activation = base.activation
    act_granularity = str(act_opts.get("granularity", "TOKEN")).upper()
    if activation.mode == "dynamic":
        activation = replace(activation, granularity=act_granularity)
    elif act_granularity != "TENSOR":
        adjustments.append({"option": "activation.granularity", "asked": act_granularity, "used": "TENSOR",
                            "why": "W8-A8 has static activation scales, fixed at calibration; only dynamic schemes "
                                   "can quantize per token"})
    return AQScheme(name, weight, activation), adjustments


# ---------------------------------------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------------------------------------


def _block_size(w: torch.Tensor, wq: WeightQuant) -> tuple[int, int]:
    return (1, wq.block(int(w.shape[1])))


def _absmax_to_scale(absmax: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """The same mapping as torchao's SYMMETRIC choose_qparams_affine: absmax / ((qmax - qmin) / 2)."""
    import torch

    return torch.clamp(absmax / ((wq.qmax - wq.qmin) / 2), min=torch.finfo(torch.float32).eps)


def _grouped(w: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """[out, in] -> [out, n_groups, group] (n_groups 1 per channel)."""
    out, cols = int(w.shape[0]), int(w.shape[1])
    block = wq.block(cols)
    return w.reshape(out, cols // block, block)


def weight_scale(w: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """Scales of `w` [out, in] for `wq`: [out] per channel, [out, in / group] per group, by `wq.method`.

    MINMAX and MOVING_AVERAGE_MINMAX use the full range (a weight is observed once, so its moving average is its
    min/max); PERCENTILE clips at the 99.9th percentile of |w| in each group; HISTOGRAM keeps, per group, the clip
    ratio in [0.5, 1] with the least squared rounding error (the L2 criterion of PyTorch's HistogramObserver).
    """
    import torch
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine

    w = w.detach().float()
    if wq.method in ("MINMAX", "MOVING_AVERAGE_MINMAX"):
        scale: torch.Tensor  # torchao is untyped
        scale, _zp = choose_qparams_affine(w, MappingType.SYMMETRIC, _block_size(w, wq), torch.int8,
                                           wq.qmin, wq.qmax, eps=torch.finfo(torch.float32).eps,
                                           scale_dtype=torch.float32)
        return scale.reshape(w.shape[0], -1).squeeze(1) if wq.group_size is None else scale.reshape(w.shape[0], -1)
    groups = _grouped(w, wq)
    if wq.method == "PERCENTILE":
        absmax = torch.quantile(groups.abs(), PERCENTILE, dim=-1)
    elif wq.method == "HISTOGRAM":
        absmax = _mse_clip(groups, wq)
    else:
        raise ValueError(f"Unknown weight calibration method {wq.method}")
    scale = _absmax_to_scale(absmax, wq)
    return scale.squeeze(1) if wq.group_size is None else scale


def _mse_clip(groups: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """Per group, the clipped absmax (ratio of the full one) whose fake-quantized group is nearest in L2."""
    import torch

    full = groups.abs().amax(-1)
    best = full.clone()
    best_err = torch.full_like(full, float("inf"))
    for ratio in torch.linspace(1.0, 0.5, HISTOGRAM_RATIOS).tolist():
        absmax = full * ratio
        scale = _absmax_to_scale(absmax, wq).unsqueeze(-1)
        err = (torch.clamp(torch.round(groups / scale), wq.qmin, wq.qmax) * scale - groups).pow(2).sum(-1)
        better = err < best_err
        best = torch.where(better, absmax, best)
        best_err = torch.where(better, err, best_err)
    return best


def _expand(scale: torch.Tensor, w: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """Scale broadcast to w's shape."""
    if scale.dim() == 1:
        return scale.unsqueeze(1).expand_as(w)
    return scale.repeat_interleave(wq.block(int(w.shape[1])), dim=1)


def quantize_weight(w: torch.Tensor, scale: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    """Integer weights (int8 storage, values in [qmin, qmax]) with torchao's quantize_affine."""
    import torch
    from torchao.quantization.quant_primitives import quantize_affine

    scale2d = scale.reshape(w.shape[0], -1).float()
    zero_point = torch.zeros(scale2d.shape, dtype=torch.int32)
    return cast("torch.Tensor", quantize_affine(w.detach().float(), _block_size(w, wq), scale2d, zero_point,
                                                torch.int8, wq.qmin, wq.qmax))


def dequantize_weight(q: torch.Tensor, scale: torch.Tensor, wq: WeightQuant) -> torch.Tensor:
    return q.float() * _expand(scale.float(), q, wq)


def fake_quantize_weight(w: torch.Tensor, wq: WeightQuant, scale: torch.Tensor | None = None) -> torch.Tensor:
    """w rounded to `wq` and back to float (what the quantized layer computes with)."""
    scale = weight_scale(w, wq) if scale is None else scale
    return dequantize_weight(quantize_weight(w, scale, wq), scale, wq)


# ---------------------------------------------------------------------------------------------------------------------
# activations (static)
# ---------------------------------------------------------------------------------------------------------------------


def activation_qparams(low: float, high: float) -> tuple[float, int]:
    """Asymmetric int8 [-128, 127] (scale, zero point) covering [low, high] and 0, as PT2E's MinMaxObserver."""
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    scale = max((high - low) / 255.0, 1e-8)
    zero_point = int(max(-128, min(127, round(-128 - low / scale))))
    return scale, zero_point
