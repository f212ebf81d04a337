"""The advanced-quantize algorithms and schemes, as data (no torch): read by validation, availability checks, the
run.yaml writer, the docs and the tests; the algorithm code (one module each in this package, found by package
discovery) is imported only when it runs.

Adding an algorithm: one module with a function decorated `@register_algorithm("NAME")` (quantize/aq/registry.py),
and one row here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AlgorithmSpec", "ALGORITHMS", "AQ_ALGORITHMS", "AQ_SCHEMES"]


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    implementation: str  # where it comes from: torchao's code, or np's implementation of the published method
    torchao_files: tuple[str, ...]  # files of torchao 0.18 it imports (relative to the torchao package folder)
    needs_hessian: bool = False


_PRIMITIVES = "quantization/quant_primitives.py"

ALGORITHMS: dict[str, AlgorithmSpec] = {a.name: a for a in (
    AlgorithmSpec("RTN", "torchao.quantization.quant_primitives "
                  "(choose_qparams_affine, quantize_affine): round to nearest", (_PRIMITIVES,)),
    AlgorithmSpec("AWQ", "torchao.prototype.awq AWQObserver (activation-aware scale "
                  "search) + np's implementation of AWQ's clip search (llm-awq auto_clip)",
                  (_PRIMITIVES, "prototype/awq/core.py")),
    AlgorithmSpec("GPTQ", "np's implementation of GPTQ (Frantar et al., 2023; "
                  "reference fasterquant, lazy batch updates, act order with static groups)", (_PRIMITIVES,),
                  needs_hessian=True),
    AlgorithmSpec("SMOOTHQUANT", "torchao.prototype.smoothquant "
                  "SmoothQuantObserver (smoothing factor); weights then rounded with torchao's primitives",
                  (_PRIMITIVES, "prototype/smoothquant/core.py")),
    AlgorithmSpec("AUTOROUND", "np's implementation of AutoRound (SignSGD "
                  "over rounding offsets and clip ranges, layer-wise)", (_PRIMITIVES,)),
)}

AQ_ALGORITHMS = tuple(ALGORITHMS)
# Schemes of Linear layers that XNNPACK lowers (quantize/aq/scheme.py builds each; a test checks they agree).
AQ_SCHEMES = ("W8-A8", "W8-A8_dynamic", "W4-A8_dynamic")
