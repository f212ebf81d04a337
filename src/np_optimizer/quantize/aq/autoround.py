"""AutoRound (Cheng et al., 2023, "Optimize Weight Rounding via Signed Gradient Descent"), np's implementation.

Per layer: learn a rounding offset V in [-0.5, 0.5] for every weight and (with `parameters.clip`) a range factor
alpha in [0.5, 1] for every output channel / group, by signed gradient descent (SignSGD, step 1/iters, linear decay,
200 steps) on the layer's output error ||X W^T - X Q(W)^T||^2 over mini-batches of calibration rows, with a
straight-through estimator for the rounding; Q(W) = s * clamp(round(W / s + V), qmin, qmax), s = alpha * range
scale. The best V/alpha seen is kept. The paper tunes a whole transformer block at a time; np tunes each Linear on
its own (layer-wise reconstruction), which fits any model without knowing its block structure.

Why not torchao's `torchao.prototype.autoround`: at torchao 0.18 it needs the separate `auto-round` package and
packs its result for the CUDA tinygemm int4 kernel (`Int4TilePackedTo4dTensor`), which XNNPACK cannot run.
"""

from __future__ import annotations

import torch

from np_optimizer.quantize.aq.registry import LayerInput, LayerQuant, register_algorithm
from np_optimizer.quantize.aq.scheme import _absmax_to_scale, _grouped

__all__ = ["autoround"]


def _round_ste(x: torch.Tensor) -> torch.Tensor:
    return (torch.round(x) - x).detach() + x


@register_algorithm("AUTOROUND")
def autoround(layer: LayerInput) -> LayerQuant:
    wq, params = layer.wq, layer.params
    weight = layer.weight.detach().float()
    inputs = layer.stats.inputs
    out_features, columns = weight.shape
    groups = _grouped(weight, wq)  # [out, ng, block]
    full = groups.abs().amax(-1, keepdim=True).clamp(min=1e-12)
    offset = torch.zeros_like(groups, requires_grad=True)
    alpha = torch.ones_like(full, requires_grad=params.clip)
    iters = params.autoround_iters
    lr = params.autoround_lr or 1.0 / iters
    generator = torch.Generator().manual_seed(params.seed)
    reference = inputs @ weight.t()

    def quantized(v: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        scale = _absmax_to_scale(full * a, wq)
        q = torch.clamp(_round_ste(groups / scale + v), wq.qmin, wq.qmax)
        return (q * scale).reshape(out_features, columns)

    def loss_on(rows: torch.Tensor, target: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (rows @ w.t() - target).pow(2).mean()

    with torch.no_grad():
        best_loss = float(loss_on(inputs, reference, quantized(offset, alpha)))
    first_loss = best_loss
    best_offset, best_alpha = offset.detach().clone(), alpha.detach().clone()
    batch = min(params.autoround_batch, inputs.shape[0])
    for step in range(iters):
        index = torch.randint(0, inputs.shape[0], (batch,), generator=generator)
        loss = loss_on(inputs[index], reference[index], quantized(offset, alpha))
        params_ = [offset, alpha] if params.clip else [offset]
        grads = torch.autograd.grad(loss, params_)
        step_lr = lr * (1.0 - step / iters)
        with torch.no_grad():
            offset -= step_lr * grads[0].sign()
            offset.clamp_(-0.5, 0.5)
            if params.clip:
                alpha -= step_lr * grads[1].sign()
                alpha.clamp_(0.5, 1.0)
            if step % 10 == 9 or step == iters - 1:
                full_loss = float(loss_on(inputs, reference, quantized(offset, alpha)))
                if full_loss < best_loss:
                    best_loss = full_loss
                    best_offset, best_alpha = offset.detach().clone(), alpha.detach().clone()
    with torch.no_grad():
        scale = _absmax_to_scale(full * best_alpha, wq)  # [out, ng, 1]
        q = torch.clamp(torch.round(groups / scale + best_offset), wq.qmin, wq.qmax).to(torch.int8)
    scale = scale.squeeze(-1)
    if wq.group_size is None:
        scale = scale.squeeze(1)
    info = {"iters": iters, "loss_rtn": round(first_loss, 8), "loss": round(best_loss, 8),
            "alpha_mean": round(float(best_alpha.mean()), 4)}
    return LayerQuant(q.reshape(out_features, columns), scale, info=info)
