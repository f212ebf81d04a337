"""Which advanced-quantize algorithms this installation can run, answered without importing torch.

Every algorithm x scheme pair is implemented (np_optimizer.quantize.aq): RTN, GPTQ and AUTOROUND need torch and
torchao only; AWQ and SMOOTHQUANT also use torchao's prototype observers (torchao.prototype.awq / .smoothquant),
whose files must be present. Availability is read from the installed files (importlib.util.find_spec on top-level
packages only: a submodule's find_spec would import torchao, and with it torch).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from np_optimizer.quantize.aq.catalog import ALGORITHMS, AQ_SCHEMES

__all__ = ["aq_unavailable_reason", "aq_model_unsupported_reason"]

def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def aq_unavailable_reason(algorithm: str, scheme: str) -> str | None:
    """Why `algorithm` with `scheme` cannot run here, or None when it can."""
    spec = ALGORITHMS.get(algorithm)
    if spec is None:
        return f"advanced_quantize has no algorithm {algorithm!r} (algorithms: {', '.join(ALGORITHMS)})."
    if scheme not in AQ_SCHEMES:
        return f"advanced_quantize has no scheme {scheme!r} (schemes: {', '.join(AQ_SCHEMES)})."
    if _package_dir("torch") is None:
        return f"advanced_quantize ({algorithm}, {scheme}) needs torch, which is not installed."
    torchao = _package_dir("torchao")
    if torchao is None:
        return f"advanced_quantize ({algorithm}, {scheme}) needs torchao, which is not installed."
    missing = [f for f in spec.torchao_files if not (torchao / f).is_file()]
    if missing:
        return (f"advanced_quantize {algorithm} needs torchao's {missing[0].removesuffix('.py').replace('/', '.')}, "
                "which this torchao install lacks (np is tested with torchao 0.18.0).")
    return None


def aq_model_unsupported_reason(model: dict[str, Any]) -> str | None:
    """Why advanced_quantize cannot take the project's model (its project.json `model` entry), or None.

    A .pt2 project holds an exported program only; advanced_quantize works on the eager PyTorch module. A Hugging
    Face folder needs `transformers`.
    """
    kind = model.get("kind")
    if kind == "pt2":
        return ("advanced_quantize works on the PyTorch model before export, but this project's model is an exported "
                f"program ({model.get('file') or model.get('source')}).")
    if kind == "hf" and _package_dir("transformers") is None:
        return "advanced_quantize on a Hugging Face model folder needs `transformers`, which is not installed."
    return None
