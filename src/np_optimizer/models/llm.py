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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
]

SEQ_LEN = 32

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
    """The model classes, defined on first use so that importing this module does not import torch.

    Long because: the classes of the small language model (attention, MLP, block, model) are one definition.
    """
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
