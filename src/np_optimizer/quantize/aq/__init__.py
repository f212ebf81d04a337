"""advanced_quantize: eager-level quantization of a model's Linear layers (language models first), before export.

    result = quantize_model(model, algorithm="AWQ", scheme="W4-A8_dynamic", options=detail_options,
                            calibration=[(input_ids,), ...])
    torch.export.export(result.model, example_inputs)   # lowers to XNNPACK as is

Where each algorithm comes from (torchao 0.18 was tried first for every one; see each module's docstring for what
did not work on CPU / ExecuTorch 1.4.1 and why):

    RTN          torchao's quantization primitives (choose_qparams_affine, quantize_affine)
    AWQ          torchao.prototype.awq's AWQObserver for the activation-aware scale search, np's own clip search
    SMOOTHQUANT  torchao.prototype.smoothquant's SmoothQuantObserver for the smoothing factor
    GPTQ         np's implementation of the published algorithm (torchao's needs CUDA-only mslk for int4)
    AUTOROUND    np's implementation of the published algorithm (torchao's needs auto-round and CUDA tinygemm)

Every algorithm ends in the same `QuantizedLinear` (modules.py): int8/int4 symmetric weights and int8 activations in
the PT2E reference q/dq form that ExecuTorch's XNNPACK partitioner lowers. Calibration, the module swap and the
per-layer report are shared here; an algorithm only decides one layer's integer weights, scales and equalization.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from np_optimizer.errors import ModelError
from np_optimizer.quantize.aq.catalog import AQ_ALGORITHMS, AQ_SCHEMES
from np_optimizer.quantize.aq.program import aq_layers

if TYPE_CHECKING:
    import torch
    from torch import nn

    from np_optimizer.quantize.aq.registry import AQParams
    from np_optimizer.quantize.aq.scheme import AQScheme

__all__ = ["AQ_ALGORITHMS", "AQ_SCHEMES", "AQResult", "quantize_model", "linear_layers", "aq_layers"]



@dataclass
class AQResult:
    model: nn.Module  # the same object that was passed in, its Linear layers swapped for QuantizedLinear
    algorithm: str
    implementation: str
    scheme: AQScheme
    layers: list[dict[str, Any]]
    adjustments: list[dict[str, str]] = field(default_factory=list)
    calibration: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        snrs = [row["weight_snr_db"] for row in self.layers if row.get("weight_snr_db") is not None]
        return {"algorithm": self.algorithm, "implementation": self.implementation, **self.scheme.parameters(),
                "quantized_layers": len(self.layers),
                "mean_layer_weight_snr_db": round(sum(snrs) / len(snrs), 3) if snrs else None,
                "seconds": round(self.seconds, 2)}


def linear_layers(model: nn.Module) -> list[str]:
    """Qualified names of the model's nn.Linear modules, in definition order."""
    from torch import nn

    return [name for name, module in model.named_modules() if isinstance(module, nn.Linear) and name]


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def _snr_db(reference: torch.Tensor, output: torch.Tensor) -> float | None:
    import math

    noise = float((reference - output).double().pow(2).sum())
    signal = float(reference.double().pow(2).sum())
    if signal == 0.0:
        return None
    return round(10 * math.log10(signal / noise), 3) if noise > 0 else math.inf


def quantize_model(model: nn.Module, *, algorithm: str, scheme: str, options: dict[str, Any],
                   calibration: Sequence[tuple[Any, ...]], params: AQParams | None = None,
                   progress: Callable[[str], None] = lambda _t: None) -> AQResult:
    """Quantize every nn.Linear of `model` in place with `algorithm` and `scheme`, calibrated on `calibration`.

    Long because: it validates the scheme's options, calibrates and swaps each layer with progress, in one pass.

    `options` is run.detail.yaml's `advanced_quantize[0]` section (weight / activation / parameters); `params`
    overrides the algorithms' internal knobs (tests and benchmarks shorten AutoRound with it).
    """
    from dataclasses import replace

    import torch

    from np_optimizer.quantize.aq.calibrate import collect_linear_stats
    from np_optimizer.quantize.aq.modules import QuantizedLinear
    from np_optimizer.quantize.aq.registry import AQParams, LayerInput, get_algorithm
    from np_optimizer.quantize.aq.scheme import activation_qparams, build_scheme, dequantize_weight

    started = time.perf_counter()
    names = linear_layers(model)
    if not names:
        raise ModelError("advanced_quantize found no nn.Linear layer in the model: it quantizes Linear layers only.",
                         hint="Use graph_quantize for models without Linear layers (convolutions, ...); "
                              "advanced_quantize is meant for language models.", code="NP-AQ-422")
    if not calibration:
        raise ModelError("advanced_quantize got no calibration samples.",
                         hint="Set advanced_quantize[0].parameters.calibration.num_samples to -1 or a positive "
                              "number in run.detail.yaml.", code="NP-AQ-422")
    algo = get_algorithm(algorithm)
    aq_scheme, adjustments = build_scheme(scheme, options)
    base = params or AQParams()
    clip = bool(options.get("parameters", {}).get("clip", base.clip))
    params = replace(base, clip=clip)
    model.eval()
    stats = collect_linear_stats(model, names, calibration, hessian=algo.needs_hessian, progress=progress)
    layers: list[dict[str, Any]] = []
    for index, name in enumerate(names, 1):
        linear = cast("nn.Linear", model.get_submodule(name))  # linear_layers lists nn.Linear modules only
        progress(f"{algorithm} {index}/{len(names)}: {name}")
        wq = aq_scheme.weight
        note = None
        if wq.group_size and linear.in_features % wq.group_size:
            wq = replace(wq, group_size=None)
            note = f"{linear.in_features} inputs are not a multiple of group size {aq_scheme.weight.group_size}: " \
                   "per-channel scales"
        layer_stats = stats[name]
        weight = linear.weight.detach().float()
        bias = linear.bias.detach().float() if linear.bias is not None else None
        result = algo.quantize_layer(LayerInput(name, weight, bias, layer_stats, wq, aq_scheme, params))
        smooth = result.smooth
        input_qparams = output_qparams = None
        if aq_scheme.activation.mode == "static":
            low, high = layer_stats.channel_min, layer_stats.channel_max
            assert low is not None and high is not None
            if smooth is not None:
                low, high = low * smooth, high * smooth
            input_qparams = activation_qparams(float(low.min()), float(high.max()))
            output_qparams = activation_qparams(layer_stats.out_min, layer_stats.out_max)
        module = QuantizedLinear(result.qweight, result.scale, bias, wq, aq_scheme.activation, smooth=smooth,
                                 input_qparams=input_qparams, output_qparams=output_qparams)
        with torch.no_grad():
            rows = layer_stats.inputs
            reference = rows @ weight.t()
            scaled = rows * smooth.unsqueeze(0) if smooth is not None else rows
            output = scaled @ dequantize_weight(result.qweight, result.scale, wq).t()
        row: dict[str, Any] = {"module": name, "in_features": int(linear.in_features),
                               "out_features": int(linear.out_features), "weight": wq.describe(),
                               "activation": aq_scheme.activation.describe(), "equalization": smooth is not None,
                               "weight_snr_db": _snr_db(reference, output), **result.info}
        if input_qparams is not None and output_qparams is not None:
            row["input_qparams"] = {"scale": input_qparams[0], "zero_point": input_qparams[1]}
            row["output_qparams"] = {"scale": output_qparams[0], "zero_point": output_qparams[1]}
        if note:
            row["note"] = note
        layers.append(row)
        _set_module(model, name, module)
    del stats
    rows_seen = {"samples": len(calibration)}
    return AQResult(model=model, algorithm=algorithm, implementation=algo.implementation, scheme=aq_scheme,
                    layers=layers, adjustments=adjustments, calibration=rows_seen,
                    seconds=time.perf_counter() - started)
