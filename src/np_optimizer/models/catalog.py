"""Built-in models: names, descriptions and input shapes, readable without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

from np_optimizer.errors import NotFoundError

__all__ = ["BuiltinModel", "BUILTIN_MODELS", "get_builtin"]


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str
    task: str
    inputs: str  # human description of the example inputs
    builder: str  # function name in np_optimizer.models.zoo


BUILTIN_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel("small_cnn", "Small residual CNN (conv-BN-ReLU, 2 residual blocks, 10 classes)", "image classification",
                 "float32[1, 3, 32, 32]", "small_cnn"),
    BuiltinModel("mobilenet_v2_tiny", "MobileNetV2-style net (inverted residuals, depthwise convs, ReLU6)",
                 "image classification", "float32[1, 3, 96, 96]", "mobilenet_v2_tiny"),
    BuiltinModel("mlp", "Three-layer MLP (64 -> 256 -> 256 -> 10)", "tabular classification", "float32[1, 64]", "mlp"),
    BuiltinModel("tiny_llm", "Llama-style decoder (2 layers, dim 128, RMSNorm, RoPE, SwiGLU, byte vocab 256)",
                 "text generation", "int64[1, 32] token ids", "tiny_llm"),
)

_BY_NAME = {m.name: m for m in BUILTIN_MODELS}


def get_builtin(name: str) -> BuiltinModel:
    model = _BY_NAME.get(name)
    if model is None:
        raise NotFoundError(
            f"Unknown built-in model '{name}'.",
            hint=f"Built-in models: {', '.join(_BY_NAME)} (`np models ls`), or pass a .pt2 file, file.py:factory, "
                 "an installed package.module:factory or a Hugging Face model folder.",
            code="NP-MDL-404",
        )
    return model
