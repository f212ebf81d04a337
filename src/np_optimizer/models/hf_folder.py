"""Hugging Face model folders already on disk (offline): check, load, and calibrate with the model's own tokenizer.

A causal language model (`*ForCausalLM`) becomes `logits = model(input_ids)` with int64[1, 32] example ids; any other
architecture transformers has a class for (image classifiers such as ResNet or ViT, encoders such as BERT) becomes
`model(<its main input>)[0]`, with example `pixel_values` float[1, C, H, W] or `input_ids` int64[1, 32].

Nothing here imports torch or transformers at module level (`np projects create` checks a folder without them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ModelError
from np_optimizer.models.llm import CALIBRATION_TEXT, EXAMPLE_TEXT, SEQ_LEN, encode, token_windows

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["HF_PIN", "hf_unavailable_reason", "check_hf_folder", "load_hf_folder", "hf_calibration_samples"]

HF_PIN = "transformers==5.24.0"
_MODULES: dict[str, type] = {}  # the wrapper module class, built on first use (it needs torch)


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

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


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

    class FirstOutput(nn.Module):
        """A Hugging Face model as `output = model(x)`: its main input in, its first output out (the logits of a
        classifier, the last hidden state of a bare encoder)."""

        def __init__(self, model: nn.Module, input_name: str) -> None:
            super().__init__()
            self.model = model
            self.input_name = input_name

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            output: torch.Tensor = self.model(**{self.input_name: x})[0]
            return output

    _MODULES["CausalLMLogits"] = CausalLMLogits
    _MODULES["FirstOutput"] = FirstOutput
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


def _architecture(config: dict[str, Any]) -> str | None:
    """The model class config.json names (`architectures[0]`), or None when it names none."""
    names = config.get("architectures")
    return str(names[0]) if isinstance(names, list) and names and isinstance(names[0], str) else None


def _is_causal_lm(architecture: str | None) -> bool:
    return architecture is None or architecture.endswith("ForCausalLM")


def load_hf_folder(folder: Path) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A Hugging Face model folder as (module with one output, example inputs), offline, float32."""
    reason = hf_unavailable_reason()
    if reason:
        raise ModelError(reason, hint=f"pip install {HF_PIN}", code="NP-MDL-501")
    architecture = _architecture(check_hf_folder(folder))
    _quiet_transformers()
    if architecture is None or _is_causal_lm(architecture):
        return _load_causal_lm(folder)
    return _load_other(folder, architecture)


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _load_causal_lm(folder: Path) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A causal LM as (module returning logits, example input int64[1, 32])."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32,
                                                     attn_implementation="sdpa")
    except Exception as exc:
        raise ModelError(f"transformers cannot load {folder} as a causal language model: {_first_line(exc)}",
                         hint="Save the model with save_pretrained (config.json names its class in `architectures`), "
                              "or pass file.py:factory returning (model, example_inputs).") from exc
    model.eval()
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


def _image_size(config: Any) -> tuple[int, int]:
    """(height, width) from the config's `image_size` (an int or a pair); 224 when it has none (ResNet's)."""
    size: Any = getattr(config, "image_size", None) or 224
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return int(size[0]), int(size[1])
    return int(size), int(size)


def _load_other(folder: Path, architecture: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Any other architecture transformers names, by its class: (module returning its first output, example)."""
    import torch
    import transformers

    cls = getattr(transformers, architecture, None)
    if cls is None or not hasattr(cls, "from_pretrained"):
        raise ModelError(f"{folder}/config.json names the architecture {architecture}, which transformers "
                         f"{transformers.__version__} does not have.",
                         hint=f"Install {HF_PIN}, or pass file.py:factory returning (model, example_inputs).")
    try:
        model = cls.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
    except Exception as exc:
        raise ModelError(f"transformers cannot load {folder} as {architecture}: {_first_line(exc)}",
                         hint="Re-save the folder with save_pretrained, or pass file.py:factory returning "
                              "(model, example_inputs).") from exc
    model.eval()
    config = model.config
    input_name = str(getattr(model, "main_input_name", "input_ids"))
    if input_name == "pixel_values":
        height, width = _image_size(config)
        generator = torch.Generator().manual_seed(0)
        example = torch.randn((1, int(getattr(config, "num_channels", 3) or 3), height, width), generator=generator)
    elif input_name == "input_ids":
        seq_len = _hf_seq_len(config)
        example = torch.tensor([_hf_ids(folder, EXAMPLE_TEXT * 4, int(config.vocab_size))[:seq_len]],
                               dtype=torch.int64)
    else:
        raise ModelError(f"np cannot make an example input for {architecture}: its main input is `{input_name}` "
                         "(np makes `input_ids` and `pixel_values`).",
                         hint="Pass file.py:factory returning (model, example_inputs) instead of the folder.")
    wrapper = _hf_modules()["FirstOutput"](model, input_name).eval()
    try:
        with torch.no_grad():
            wrapper(example)
    except Exception as exc:
        raise ModelError(f"{architecture} from {folder} does not run on the example input np made "
                         f"({input_name} {list(example.shape)}): {_first_line(exc)}",
                         hint="Pass file.py:factory returning (model, example_inputs) instead of the folder.") from exc
    return wrapper, (example,)


def hf_calibration_samples(folder: Path, num_samples: int = -1) -> list[tuple[torch.Tensor, ...]] | None:
    """The built-in calibration text through the folder's own tokenizer; None when the folder ships none, or when
    the model does not take token ids (an image model)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    architecture = _architecture(config)
    if not _is_causal_lm(architecture):
        import transformers

        if getattr(getattr(transformers, str(architecture), None), "main_input_name", None) != "input_ids":
            return None
    tokenizer = _hf_tokenizer(folder)
    if tokenizer is None:
        return None
    seq_len = int(min(SEQ_LEN, config.get("max_position_embeddings") or SEQ_LEN))
    ids = [int(i) for i in tokenizer(CALIBRATION_TEXT, add_special_tokens=False)["input_ids"]]
    return token_windows(ids, seq_len, num_samples)
