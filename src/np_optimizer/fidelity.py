"""How far a checkpoint's outputs are from INPUT_MODEL's: SNR (dB) and max abs error, over every output tensor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["flat_tensors", "snr_db", "max_abs_error", "compare_outputs"]


def flat_tensors(out: Any) -> list[Any]:
    import torch

    from np_optimizer.adapters.torch_private import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _pair(ref: Any, test: Any) -> tuple[Any, Any]:
    import torch

    r, t = flat_tensors(ref), flat_tensors(test)
    if len(r) != len(t) or any(a.shape != b.shape for a, b in zip(r, t)):
        raise ValueError("outputs differ in structure or shape")

    def cat(ts: list[Any]) -> Any:
        if not ts:
            return torch.zeros(0, dtype=torch.float64)
        return torch.cat([x.detach().reshape(-1).to(torch.float64) for x in ts])

    return cat(r), cat(t)


def snr_db(ref: Any, test: Any) -> float:
    """10*log10(sum ref^2 / sum (ref-test)^2) in float64; inf when identical."""
    r, t = _pair(ref, test)
    noise = float(((r - t) ** 2).sum())
    signal = float((r**2).sum())
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def max_abs_error(ref: Any, test: Any) -> float:
    r, t = _pair(ref, test)
    return float((r - t).abs().max()) if r.numel() else 0.0


def compare_outputs(reference: Sequence[Any], outputs: Sequence[Any]) -> dict[str, float | None]:
    """SNR over all samples' outputs together (the minimum per output tensor is also given) and max abs error."""
    per_tensor: list[float] = []
    ref_tensors = [flat_tensors(r) for r in reference]
    out_tensors = [flat_tensors(o) for o in outputs]
    for index in range(len(ref_tensors[0]) if ref_tensors else 0):
        per_tensor.append(snr_db([r[index] for r in ref_tensors], [o[index] for o in out_tensors]))
    snr = snr_db(list(reference), list(outputs))
    return {
        "snr_db": None if math.isinf(snr) else round(snr, 3),
        "snr_identical": math.isinf(snr) and snr > 0,
        "min_tensor_snr_db": None if not per_tensor or math.isinf(min(per_tensor)) else round(min(per_tensor), 3),
        "max_abs_error": max_abs_error(list(reference), list(outputs)),
    }
