"""Export a model and save/load exported programs (.pt2), including quantized ones, in any process."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ModelError
from np_optimizer.files import write_bytes

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram

__all__ = ["export_model", "save_program", "write_program", "load_program", "save_inputs", "load_inputs", "user_error_location"]


def user_error_location(exc: BaseException) -> str:
    """The first line of a torch.export error plus the user's source line it names, when there is one."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    where = [ln for ln in lines if ln.startswith("File ") and "site-packages" not in ln and "/torch/" not in ln]
    return f"{first} ({where[-1]})" if where else first


def export_model(model: torch.nn.Module, example_inputs: tuple[Any, ...]) -> ExportedProgram:
    """torch.export the model in eval mode; a model export cannot trace is a ModelError naming the op or line."""
    import torch

    model.eval()
    try:
        return torch.export.export(model, tuple(example_inputs))
    except Exception as exc:
        raise ModelError(
            f"torch.export cannot trace the model: {user_error_location(exc)}",
            hint="Remove data-dependent Python control flow or unsupported ops from forward() (see the log file for "
            "the full error); torch.export needs one static graph.",
            code="NP-MDL-500",
        ) from exc


def save_program(program: ExportedProgram, path: Path) -> Path:
    """Write a .pt2 atomically (temporary file, then rename), so a crash never leaves half a checkpoint; the same
    program gives the same bytes in any process (adapters/torch_private.py: stable_provenance)."""
    write_program(program, path)
    return path


def write_program(program: ExportedProgram, path: Path) -> str:
    """save_program, returning the sha256 of the bytes written (hashed in memory: the file is not read again)."""
    import hashlib

    import torch

    from np_optimizer.adapters.torch_private import stable_provenance, without_canonical_check

    buffer = io.BytesIO()
    with stable_provenance(program), without_canonical_check():  # the same bytes, half the CPU
        torch.export.save(program, buffer)
    data = buffer.getvalue()
    write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def load_program(path: Path) -> ExportedProgram:
    """Load a .pt2, registering the quantization ops a PT2E or torchao program refers to.

    Deserialization resolves `quantized_decomposed::*` by name, registered only once torch's module of them is
    imported (adapters/torch_private.py: register_quantized_decomposed); torchao programs need `torchao` imported, and programs with
    ExecuTorch's dim-order copies need its registry.
    """
    import torch

    from np_optimizer.adapters.torch_private import register_quantized_decomposed

    register_quantized_decomposed()

    try:
        return torch.export.load(str(path))
    except RuntimeError:
        try:
            # torchao::* ops; and ExecuTorch's dim_order_ops::_to_dim_order_copy, which a program the Arm quantizer
            # prepared may hold (a .to() of an integer input, e.g. BERT's attention mask)
            import torchao  # noqa: F401
            from executorch.exir.passes import dim_order_ops_registry  # noqa: F401

            return torch.export.load(str(path))
        except Exception as exc:
            raise ModelError(f"Cannot load checkpoint {path}: {str(exc).splitlines()[0]}",
                             hint="The file is damaged or was written by another torch version; rerun the step "
                             "with `np run --retry`.", code="NP-CKP-500") from exc
    except Exception as exc:
        raise ModelError(f"Cannot load checkpoint {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                         hint="The file is damaged or truncated; rerun the step with `np run --retry`.",
                         code="NP-CKP-500") from exc


def save_inputs(inputs: list[tuple[torch.Tensor, ...]], path: Path) -> None:
    import torch

    buffer = io.BytesIO()
    torch.save([tuple(t.detach().contiguous() for t in sample) for sample in inputs], buffer)
    write_bytes(path, buffer.getvalue())  # atomic, like every file np writes


def load_inputs(path: Path) -> list[tuple[torch.Tensor, ...]]:
    import torch

    return [tuple(sample) for sample in torch.load(path, weights_only=True)]
