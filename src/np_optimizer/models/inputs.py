"""Calibration and evaluation inputs: the project's dataset when it has one, else seeded generated samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError, first_line

if TYPE_CHECKING:
    import torch

__all__ = ["InputSet", "calibration_inputs", "evaluation_inputs", "validation_inputs", "check_dataset",
           "GENERATED_WARNING"]

GENERATED_WARNING = (
    "No calibration dataset: {n} generated samples shaped like the example input (Gaussian noise; random ids for "
    "integer inputs) were used. Real "
    "data gives better accuracy: create the project with --calibration-dataset DIR."
)
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}


@dataclass
class InputSet:
    samples: list[tuple[torch.Tensor, ...]]
    source: str  # "dataset:<folder>" | "generated (seed N)" | "example input + ..."
    warnings: list[str] = field(default_factory=list)


def _files(folder: Path) -> list[Path]:
    suffixes = {".npy", ".pt", *_IMAGE_SUFFIXES}
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)


_KINDS = {".npy": "a NumPy array (numpy.save)", ".pt": "tensors saved with torch.save"}


def _read(path: Path, example: tuple[torch.Tensor, ...]) -> Any:
    """The file's content as numpy / torch / Pillow give it; what they raise for a damaged or foreign file (many
    types: ValueError, EOFError, UnpicklingError, OSError, RuntimeError) becomes one error naming the file."""
    import numpy as np
    import torch

    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return torch.from_numpy(np.load(path, allow_pickle=False))
        if suffix == ".pt":
            return torch.load(path, weights_only=True)
    except Exception as exc:  # the libraries' boundary: a file they cannot read is the user's data, not a bug
        raise ConfigError(f"Calibration file {path} cannot be read as {_KINDS[suffix]}: {first_line(exc)}",
                          hint="Replace or remove that file (a project keeps its copy in data/calibration), or "
                               "use a folder of valid samples.", code="NP-DAT-422") from exc
    return _load_image(path, example[0])


def _load_file(path: Path, example: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    import torch

    data = _read(path, example)
    tensors = tuple(data) if isinstance(data, (list, tuple)) else (data,)
    if len(tensors) != len(example) or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ConfigError(f"Calibration file {path} holds {len(tensors)} tensor(s); the model takes {len(example)}.",
                          hint="Store one tensor per model input in each file (a tuple in a .pt for several).",
                          code="NP-DAT-422")
    out = []
    for tensor, ref in zip(tensors, example):
        if tuple(tensor.shape) == tuple(ref.shape[1:]):
            tensor = tensor.unsqueeze(0)  # a sample without the batch dimension
        if tuple(tensor.shape) != tuple(ref.shape):
            raise ConfigError(
                f"Calibration file {path} has shape {tuple(tensor.shape)}, the model input is {tuple(ref.shape)}.",
                hint="Give each sample the model's input shape (with or without the batch dimension).",
                code="NP-DAT-422")
        out.append(tensor.to(ref.dtype))
    return tuple(out)


def check_dataset(folder: Path, example: tuple[torch.Tensor, ...]) -> int:
    """Load every sample of a calibration folder against the model's example inputs, as a run would; returns how many
    there are, or raises ConfigError (NP-DAT-422) naming the first file that cannot be used."""
    files = _files(folder)
    if not files:
        raise ConfigError(f"Calibration folder {folder} holds no .npy, .pt or image files.",
                          hint="Put one sample per file: .npy/.pt tensors shaped like the model input, or images.",
                          code="NP-DAT-422")
    for path in files:
        _load_file(path, example)
    return len(files)


def _load_image(path: Path, ref: torch.Tensor) -> torch.Tensor:
    """An image resized to the input's H x W, as float in [0, 1], NCHW."""
    import numpy as np
    import torch

    try:
        from PIL import Image
    except ImportError as exc:  # pillow is a dependency; this guards a broken install
        raise ConfigError("Reading images needs Pillow.", hint="Reinstall np with `make test`.") from exc
    if ref.dim() != 4:
        raise ConfigError(f"Calibration image {path} given, but the model input {tuple(ref.shape)} is not an image.",
                          hint="Use .npy or .pt files shaped like the model input.", code="NP-DAT-422")
    channels, height, width = int(ref.shape[1]), int(ref.shape[2]), int(ref.shape[3])
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB").resize((width, height))
            array = np.asarray(image, dtype=np.float32) / 255.0
    except Exception as exc:  # Pillow's UnidentifiedImageError, OSError for a truncated file, DecompressionBombError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"Calibration image {path} cannot be read: {first}",
                          hint="Replace or remove that file (a project keeps its copy in data/calibration).",
                          code="NP-DAT-422") from exc
    tensor = torch.from_numpy(array)
    tensor = tensor.unsqueeze(0) if channels == 1 else tensor.permute(2, 0, 1)
    if tensor.shape[0] != channels:
        raise ConfigError(f"Calibration image {path} has {tensor.shape[0]} channels, the model takes {channels}.",
                          hint="Use images with the model's channel count.", code="NP-DAT-422")
    return tensor.unsqueeze(0)


def _generated(example: tuple[torch.Tensor, ...], count: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(count):
        sample = []
        for ref in example:
            if ref.is_floating_point():
                sample.append(torch.randn(ref.shape, generator=generator, dtype=ref.dtype))
            else:  # token ids and other integer inputs: draw within the example's range
                low, high = int(ref.min()), int(ref.max()) + 1
                sample.append(torch.randint(low, max(high, low + 1), ref.shape, generator=generator, dtype=ref.dtype))
        samples.append(tuple(sample))
    return samples


def calibration_inputs(dataset: Path | None, example: tuple[torch.Tensor, ...], num_samples: int,
                       seed: int) -> InputSet:
    """Up to `num_samples` samples of the project's dataset, or generated ones with a warning."""
    if dataset is not None:
        files = _files(dataset)
        if not files:
            raise ConfigError(f"Calibration folder {dataset} holds no .npy, .pt or image files.",
                              hint="Recreate the project with a folder of samples.", code="NP-DAT-422")
        chosen = files if num_samples < 0 else files[:num_samples]
        return InputSet([_load_file(p, example) for p in chosen], f"dataset {dataset.name} ({len(chosen)} files)")
    count = max(num_samples, 1)
    return InputSet(_generated(example, count, seed), f"generated ({count} samples, seed {seed})",
                    [GENERATED_WARNING.format(n=count)])


def evaluation_inputs(dataset: Path | None, example: tuple[torch.Tensor, ...], num_samples: int, seed: int,
                      skip: int) -> InputSet:
    """The example input, then held-out dataset samples (those after the first `skip`), then generated ones."""
    samples = [example]
    parts = ["example input"]
    if dataset is not None and num_samples > 1:
        held_out = _files(dataset)[skip:skip + num_samples - 1]
        samples += [_load_file(p, example) for p in held_out]
        if held_out:
            parts.append(f"{len(held_out)} held-out dataset samples")
    missing = num_samples - len(samples)
    if missing > 0:
        samples += _generated(example, missing, seed + 1)
        parts.append(f"{missing} generated (seed {seed + 1})")
    return InputSet(samples, " + ".join(parts))


def validation_inputs(dataset: Path | None, example: tuple[torch.Tensor, ...], skip: int, limit: int) -> InputSet:
    """Up to `limit` dataset samples past the first `skip` (the calibration and the evaluation samples): inputs that
    neither calibrate nor score a program, for choices made before the score (graph_quantize's `sensitivity:`).
    Empty without a dataset or past its end."""
    chosen = _files(dataset)[skip:skip + limit] if dataset is not None else []
    return InputSet([_load_file(p, example) for p in chosen],
                    f"dataset {dataset.name} ({len(chosen)} files after the first {skip})" if dataset is not None
                    else "none (no dataset)")
