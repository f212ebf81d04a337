"""Language models: the built-in `tiny_llm`, its byte-level tokenizer and calibration text, and Hugging Face model
folders already on disk (loaded offline with `transformers`, when it is installed).

`tiny_llm` is a Llama-style decoder-only transformer defined here (no download): token embedding, `n_layers` blocks
of RMSNorm -> causal self-attention with rotary positions -> residual, RMSNorm -> SwiGLU MLP -> residual, a final
RMSNorm and an untied `lm_head`. Module names follow Hugging Face's Llama (`layers.N.self_attn.q_proj`,
`layers.N.mlp.gate_proj`, `input_layernorm`, ...), so tools written for one read the other. It takes a fixed
`int64[1, 32]` window of byte ids (vocab 256) and returns `float32[1, 32, 256]` logits. Weights are seeded, not
trained: it is a workload for quantization and lowering, not a text generator.

Nothing here imports torch at module level (the Hugging Face folder checks run in `np projects create`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ModelError

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "TinyLlamaConfig",
    "CALIBRATION_TEXT",
    "EXAMPLE_TEXT",
    "SEQ_LEN",
    "encode",
    "decode",
    "token_windows",
    "calibration_samples",
    "build_tiny_llm",
    "HF_PIN",
    "hf_unavailable_reason",
    "check_hf_folder",
    "load_hf_folder",
    "hf_calibration_samples",
]

SEQ_LEN = 32
HF_PIN = "transformers==5.24.0"

# Written for np: plain prose about the things np deals with, so the byte statistics look like English text.
CALIBRATION_TEXT = """\
A small language model reads text one token at a time. Each token becomes a vector, and every layer of the model \
mixes the vectors of earlier tokens into the current one through attention, then reshapes each vector on its own \
through a feed-forward network. At the end, a last linear layer turns the vector into a score for every token of \
the vocabulary, and the highest score is the model's guess for the next token.

Running such a model on a small computer is a matter of memory and arithmetic. A Raspberry Pi has a few gigabytes \
of memory and four Arm cores; a phone has a little more; a microcontroller has a few hundred kilobytes. Most of the \
memory goes to the weights of the linear layers, stored as 32-bit floating point numbers unless someone does \
something about it. Quantization is that something: each weight is stored as a small integer and a shared scale.

Eight-bit integers keep almost all of the accuracy and divide the size by four. Four-bit integers divide it by \
eight, but the rounding error grows sixteen times, and a careless rounding of four-bit weights can ruin a model. \
The error matters most where the inputs of a layer are large, because a weight's error is multiplied by the input \
it meets. Language models are known for a few input channels whose values are a hundred times larger than the \
rest; those channels decide much of the output.

Several methods exist to round better. Activation-aware weight quantization scales up the weights that meet large \
inputs before rounding them and scales the inputs down by the same amount, so the product is unchanged but the \
important weights lose less. SmoothQuant moves the difficulty from the activations to the weights in the same way. \
GPTQ rounds the weights of a layer one column at a time and corrects the columns not yet rounded for the error just \
made, using second-order information gathered from calibration inputs. AutoRound learns, by signed gradient \
descent, whether each weight should be rounded up or down, and how far to clip each group's range.

Calibration data is a handful of ordinary inputs. The methods run the original model on them, watch what enters \
each linear layer, and choose their scales and roundings so that the quantized layer gives nearly the same outputs \
on such inputs. The calibration text does not need to be long or special; it needs to look like what the model will \
read later. This paragraph, and the ones before it, are the calibration text of the tiny model that ships with np.

After quantization, the model is exported as a graph, optimized, and compiled for the device. On a Raspberry Pi 5 \
the compiled program runs on the XNNPACK backend of ExecuTorch, which has fast kernels for eight-bit activations \
multiplied by four-bit or eight-bit weights. The profiler then reports the size of the program, the number of \
multiply-accumulate operations, and how far the outputs have moved from those of the original model.
"""

EXAMPLE_TEXT = "The quick brown fox jumps over the lazy dog, then naps in the warm sun by the river bank."


def encode(text: str) -> list[int]:
    """Byte-level tokenizer of tiny_llm: one token per UTF-8 byte (vocab 256)."""
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    return bytes(int(i) % 256 for i in ids).decode("utf-8", errors="replace")


def token_windows(ids: list[int], seq_len: int = SEQ_LEN, limit: int = -1) -> list[tuple[torch.Tensor, ...]]:
    """Non-overlapping `seq_len` windows of `ids` as `(int64[1, seq_len],)` samples (at most `limit`; -1: all)."""
    import torch

    count = len(ids) // seq_len
    if limit >= 0:
        count = min(count, limit)
    return [(torch.tensor(ids[i * seq_len:(i + 1) * seq_len], dtype=torch.int64).unsqueeze(0),)
            for i in range(count)]


def calibration_samples(num_samples: int = -1, seq_len: int = SEQ_LEN) -> list[tuple[torch.Tensor, ...]]:
    """The built-in calibration text as tiny_llm inputs: every window, or the first `num_samples`."""
    return token_windows(encode(CALIBRATION_TEXT), seq_len, num_samples)


# ---------------------------------------------------------------------------------------------------------------------
# tiny_llm
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyLlamaConfig:
    vocab_size: int = 256
    dim: int = 128
    n_layers: int = 2
    n_heads: int = 4
    hidden_dim: int = 384  # a multiple of 128, so every group size (32, 64, 128) divides every Linear's input
    seq_len: int = SEQ_LEN
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


def _modules() -> dict[str, type]:
    """The model classes, defined on first use so that importing this module does not import torch."""
    global _MODULES
    if _MODULES:
        return _MODULES
    import torch
    import torch.nn.functional as F
    from torch import nn

    # nn.Module.__call__ is typed as returning Any, hence the `type: ignore[no-any-return]` on the forward returns

    class RMSNorm(nn.Module):
        def __init__(self, dim: int, eps: float) -> None:
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Attention(nn.Module):
        def __init__(self, cfg: TinyLlamaConfig) -> None:
            super().__init__()
            self.n_heads, self.head_dim = cfg.n_heads, cfg.dim // cfg.n_heads
            self.q_proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.k_proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.v_proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.o_proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

        def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(y.transpose(1, 2).reshape(b, t, d))  # type: ignore[no-any-return]

    class MLP(nn.Module):
        def __init__(self, cfg: TinyLlamaConfig) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
            self.up_proj = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
            self.down_proj = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # type: ignore[no-any-return]

    class Block(nn.Module):
        def __init__(self, cfg: TinyLlamaConfig) -> None:
            super().__init__()
            self.input_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.self_attn = Attention(cfg)
            self.post_attention_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.mlp = MLP(cfg)

        def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))  # type: ignore[no-any-return]

    class TinyLlama(nn.Module):
        """Llama-style decoder: int64[B, seq_len] token ids -> float32[B, seq_len, vocab] logits."""

        rope_cos: torch.Tensor  # buffers, registered in __init__
        rope_sin: torch.Tensor

        def __init__(self, cfg: TinyLlamaConfig) -> None:
            super().__init__()
            self.config = cfg
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dim)
            self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
            self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
            head_dim = cfg.dim // cfg.n_heads
            inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
            angles = torch.outer(torch.arange(cfg.seq_len, dtype=torch.float32), inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # [seq_len, head_dim], Hugging Face's rotate-half layout
            self.register_buffer("rope_cos", angles.cos(), persistent=False)
            self.register_buffer("rope_sin", angles.sin(), persistent=False)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            t = input_ids.shape[1]
            cos, sin = self.rope_cos[:t], self.rope_sin[:t]
            x = self.embed_tokens(input_ids)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))  # type: ignore[no-any-return]

    _MODULES.update(RMSNorm=RMSNorm, Attention=Attention, MLP=MLP, Block=Block, TinyLlama=TinyLlama)
    return _MODULES


_MODULES: dict[str, type] = {}


def build_tiny_llm(seed: int = 0, *, config: TinyLlamaConfig | None = None, outlier_channels: int = 0,
                   outlier_scale: float = 64.0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """tiny_llm in eval mode with seeded weights, and its example input (the first window of EXAMPLE_TEXT).

    `outlier_channels` > 0 builds the same function with the activation outliers real LLMs show: in every RMSNorm
    those few channels (the same ones everywhere) are multiplied by `outlier_scale`, and the matching input columns of
    the Linear layers the norm feeds (q/k/v, gate/up, lm_head) are divided by it. The float outputs do not change
    (up to rounding), but every such Linear sees a few input channels ~`outlier_scale` times larger than the rest,
    multiplied by weights that much smaller: the case AWQ, GPTQ and SmoothQuant were made for.
    """
    import torch

    cfg = config or TinyLlamaConfig()
    torch.manual_seed(seed)
    model = _modules()["TinyLlama"](cfg)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                # Trained norms are not all ones; give them some spread (as _randomize_bn does for BatchNorm).
                param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=generator))
        if outlier_channels > 0:
            channels = torch.randperm(cfg.dim, generator=generator)[:outlier_channels]
            fed: list[tuple[Any, tuple[Any, ...]]]  # (norm, the Linear layers it feeds)
            fed = [(block.input_layernorm, (block.self_attn.q_proj, block.self_attn.k_proj, block.self_attn.v_proj))
                   for block in model.layers]
            fed += [(block.post_attention_layernorm, (block.mlp.gate_proj, block.mlp.up_proj))
                    for block in model.layers]
            fed.append((model.norm, (model.lm_head,)))
            for norm, linears in fed:
                norm.weight[channels] *= outlier_scale
                for linear in linears:
                    linear.weight[:, channels] /= outlier_scale
    ids = encode(EXAMPLE_TEXT)[:cfg.seq_len]
    return model.eval(), (torch.tensor([ids], dtype=torch.int64),)


# ---------------------------------------------------------------------------------------------------------------------
# Hugging Face model folders (offline)
# ---------------------------------------------------------------------------------------------------------------------

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def hf_unavailable_reason() -> str | None:
    """Why a Hugging Face folder cannot be loaded here (transformers missing), or None. Does not import it."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return "Loading a Hugging Face model folder needs `transformers`, which is not installed."
    return None


def check_hf_folder(folder: Path) -> dict[str, Any]:
    """Check, without torch, that `folder` holds a Hugging Face model (config.json and weights); its config."""
    config_file = folder / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{folder} is a folder but holds no config.json.",
                         hint="Pass a Hugging Face model folder (config.json + weights), a .pt2 file, "
                              "file.py:factory or a built-in name.") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"{config_file} cannot be read as JSON: {exc}.", hint="Fix or re-save the model folder.") \
            from exc
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelError(f"{config_file} has no `model_type`: it is not a Hugging Face model config.",
                         hint="Save the model with `model.save_pretrained(folder)`.")
    if not any((folder / name).is_file() for name in _WEIGHT_FILES) and not any(folder.glob("*.safetensors")):
        raise ModelError(f"{folder} has a config.json but no weights (model.safetensors or pytorch_model.bin).",
                         hint="Save the model with `model.save_pretrained(folder)`; np loads folders offline and "
                              "never downloads weights.")
    return config


def _quiet_transformers() -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # transformers leaves these unannotated
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _hf_modules() -> dict[str, type]:
    if "CausalLMLogits" in _MODULES:
        return _MODULES
    import torch
    from torch import nn

    class CausalLMLogits(nn.Module):
        """A Hugging Face causal LM as `logits = model(input_ids)`: no cache, one output.

        With `explicit_positions` the position ids and the causal mask (4-D, bool) are constants handed to the model,
        so the exported graph holds no integer arithmetic to build them; that arithmetic trips the PT2E quantizer
        (its scalar-to-tensor transform makes `arange + 0` a float, and the mask's index ops then fail).
        """

        positions: torch.Tensor  # buffers, registered in __init__
        causal_mask: torch.Tensor

        def __init__(self, model: nn.Module, seq_len: int, explicit_positions: bool = True) -> None:
            super().__init__()
            self.model = model
            self.explicit_positions = explicit_positions
            self.register_buffer("positions", torch.arange(seq_len), persistent=False)
            causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()[None, None]
            self.register_buffer("causal_mask", causal, persistent=False)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            if not self.explicit_positions:  # nn.Module.__call__ is typed as returning Any
                return self.model(input_ids=input_ids, use_cache=False).logits  # type: ignore[no-any-return]
            t = input_ids.shape[1]
            positions = self.positions[:t]
            logits: torch.Tensor = self.model(input_ids=input_ids, position_ids=positions.unsqueeze(0),
                                              cache_position=positions,
                                              attention_mask=self.causal_mask[:, :, :t, :t], use_cache=False).logits
            return logits

    _MODULES["CausalLMLogits"] = CausalLMLogits
    return _MODULES


def _hf_tokenizer(folder: Path) -> Any | None:
    """The folder's tokenizer when it ships one, else None (np then uses byte ids modulo the vocabulary)."""
    if not any((folder / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception:  # a broken or exotic tokenizer must not stop loading the model itself
        return None


def _hf_ids(folder: Path, text: str, vocab_size: int) -> list[int]:
    tokenizer = _hf_tokenizer(folder)
    if tokenizer is not None:
        return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    return [b % vocab_size for b in encode(text)]


def _hf_seq_len(config: Any) -> int:
    limit = getattr(config, "max_position_embeddings", None) or SEQ_LEN
    return int(min(SEQ_LEN, limit))


def load_hf_folder(folder: Path) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A Hugging Face causal LM folder as (module returning logits, example input int64[1, 32]), offline, float32."""
    import torch

    reason = hf_unavailable_reason()
    if reason:
        raise ModelError(reason, hint=f"pip install {HF_PIN}", code="NP-MDL-501")
    check_hf_folder(folder)
    _quiet_transformers()
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32,
                                                     attn_implementation="sdpa")
    except Exception as exc:
        raise ModelError(f"transformers cannot load {folder} as a causal language model: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                         hint="np takes decoder-only (causal LM) folders saved with save_pretrained.") from exc
    model.eval()  # type: ignore[no-untyped-call]  # transformers' auto-model type has unannotated methods
    config = model.config
    seq_len = _hf_seq_len(config)
    ids = _hf_ids(folder, EXAMPLE_TEXT * 4, int(config.vocab_size))[:seq_len]
    example = torch.tensor([ids], dtype=torch.int64)
    wrapper = _hf_modules()["CausalLMLogits"](model, seq_len).eval()
    with torch.no_grad():
        plain = model(input_ids=example, use_cache=False).logits
        try:  # a model that rejects explicit positions / a 4-D mask, or computes otherwise with them, runs plain
            same = torch.allclose(wrapper(example), plain, rtol=1e-4, atol=1e-5)
        except Exception:
            same = False
    wrapper.explicit_positions = same
    return wrapper, (example,)


def hf_calibration_samples(folder: Path, num_samples: int = -1) -> list[tuple[torch.Tensor, ...]] | None:
    """The built-in calibration text through the folder's own tokenizer; None when the folder ships none."""
    tokenizer = _hf_tokenizer(folder)
    if tokenizer is None:
        return None
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    seq_len = int(min(SEQ_LEN, config.get("max_position_embeddings") or SEQ_LEN))
    ids = [int(i) for i in tokenizer(CALIBRATION_TEXT, add_special_tokens=False)["input_ids"]]
    return token_windows(ids, seq_len, num_samples)
