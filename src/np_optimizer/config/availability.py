"""Which advanced-quantize algorithms this installation can run, answered without importing torch."""

from __future__ import annotations

__all__ = ["aq_unavailable_reason"]


def aq_unavailable_reason(algorithm: str, scheme: str) -> str | None:
    """Why `algorithm` with `scheme` cannot run here, or None when it can."""
    return (
        f"advanced_quantize ({algorithm}, {scheme}) is not available in this version of np: "
        "the eager-level quantizers have not landed yet."
    )
