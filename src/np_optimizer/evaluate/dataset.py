"""Labelled evaluation datasets: an image folder (`DIR/<class>/*.png|jpg|npy`) or tensor files (`inputs` + `labels`
in one `.npz` or `.pt`), read into one input tensor and one label vector for a single-input model.

Nothing is unpickled: `.npy`/`.npz` load with `allow_pickle=False`, `.pt` with `torch.load(weights_only=True)`.
Every problem is a ConfigError (NP-DAT-422, exit 3) naming the file or folder at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError, NotFoundError, first_line

if TYPE_CHECKING:
    import torch

__all__ = ["LabelledDataset", "IMAGE_SUFFIXES", "TENSOR_SUFFIXES", "detect_format", "default_transform",
           "load_labelled", "dataset_files"]

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}
SAMPLE_SUFFIXES = IMAGE_SUFFIXES | {".npy"}
TENSOR_SUFFIXES = {".npz", ".pt"}
_HINT = "Fix or remove that file; `np datasets add --help` describes both layouts."


@dataclass
class LabelledDataset:
    inputs: torch.Tensor  # (N, *sample shape), the model input's dtype, transform applied
    labels: torch.Tensor  # (N,) int64
    classes: list[str]
    format: str  # "image_folder" | "tensors"
    transform: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _bad(message: str, hint: str = _HINT) -> ConfigError:
    return ConfigError(message, hint=hint, code="NP-DAT-422")


def _tensor_file(root: Path) -> Path | None:
    if root.is_file():
        return root
    files = [p for p in root.iterdir() if p.is_file() and p.suffix.lower() in TENSOR_SUFFIXES]
    return files[0] if len(files) == 1 and not any(p.is_dir() for p in root.iterdir()) else None


def detect_format(root: Path) -> str:
    """"tensors" for one .npz/.pt file (or a folder holding only that), else "image_folder"; NotFoundError for a
    missing path."""
    if not root.exists():
        raise NotFoundError(f"Evaluation dataset {root} does not exist.",
                            hint="Pass a folder of class subfolders, or a .npz/.pt file with `inputs` and `labels`.",
                            code="NP-DAT-404")
    if root.is_file() and root.suffix.lower() not in TENSOR_SUFFIXES:
        raise _bad(f"Evaluation dataset {root} is a {root.suffix or 'suffix-less'} file; np reads .npz or .pt "
                   "files (arrays `inputs` and `labels`) or an image folder.")
    return "tensors" if _tensor_file(root) is not None else "image_folder"


def default_transform(example: torch.Tensor) -> dict[str, Any]:
    """What np does to an image so it fits the example input: resize to H x W, scale 0..255 to 0..1, then
    (x - mean) / std per channel (identity by default; set mean/std for a model trained on normalised inputs)."""
    channels = int(example.shape[1]) if example.dim() == 4 else 1
    size = [int(example.shape[2]), int(example.shape[3])] if example.dim() == 4 else []
    return {"resize": size, "channels": channels, "scale": 1 / 255, "mean": [0.0] * channels,
            "std": [1.0] * channels}


def dataset_files(root: Path) -> list[Path]:
    """The files np reads from a dataset (what a project copies)."""
    tensor = _tensor_file(root)
    if tensor is not None:
        return [tensor]
    return sorted(p for d in root.iterdir() if d.is_dir() for p in d.rglob("*")
                  if p.is_file() and p.suffix.lower() in SAMPLE_SUFFIXES)


def load_labelled(root: Path, example: torch.Tensor, *, num_classes: int | None,
                  transform: dict[str, Any] | None = None) -> LabelledDataset:
    """The dataset at `root` checked against the model's (single) example input and its number of output classes."""
    kind = detect_format(root)
    if kind == "tensors":
        path = _tensor_file(root)
        assert path is not None  # detect_format found it
        inputs, labels = _read_tensor_file(path, example)
        classes = [str(i) for i in range(num_classes or int(labels.max()) + 1)]
        _check_labels(labels, num_classes, path)
        return LabelledDataset(inputs, labels, classes, kind, {"note": "inputs used as stored"})
    spec = dict(transform or default_transform(example))
    inputs, labels, classes = _read_image_folder(root, example, spec)
    _check_labels(labels, num_classes, root, classes)
    return LabelledDataset(inputs, labels, classes, kind, spec)


def _fit(tensor: torch.Tensor, example: torch.Tensor, path: Path, *, batched: bool) -> torch.Tensor:
    """`tensor` as (N, *sample shape) in the example's dtype, or an error naming the file."""
    sample = tuple(example.shape[1:])
    shape = tuple(tensor.shape)
    if not batched and shape == tuple(example.shape) and example.shape[0] == 1:
        shape, tensor = sample, tensor[0]
    if not batched:
        if shape != sample:
            raise _bad(f"Evaluation sample {path} has shape {shape}; the model takes {sample} per sample "
                       f"(input {tuple(example.shape)}).", "Store each sample in the model input's shape.")
        return tensor.unsqueeze(0).to(example.dtype)
    if tensor.dim() == 0 or tuple(tensor.shape[1:]) != sample:
        raise _bad(f"Evaluation inputs in {path} have shape {tuple(tensor.shape)}; expected (N, "
                   f"{', '.join(map(str, sample))}) for the model input {tuple(example.shape)}.",
                   "Store `inputs` as N samples stacked on the first dimension.")
    return tensor.to(example.dtype)


def _read_tensor_file(path: Path, example: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    import numpy as np
    import torch

    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                data = {k: torch.from_numpy(archive[k]) for k in archive.files if k in ("inputs", "labels")}
        else:
            loaded = torch.load(path, weights_only=True)
            data = loaded if isinstance(loaded, dict) else {}
            if not isinstance(loaded, dict):
                raise _bad(f"Evaluation file {path} holds a {type(loaded).__name__}, not a dict with `inputs` and "
                           "`labels` tensors.", "Save it with torch.save({'inputs': X, 'labels': y}, path).")
    except ConfigError:
        raise
    except Exception as exc:  # numpy/torch raise many types for damaged or pickled content: the user's file
        reason = first_line(exc)
        if reason.startswith("Weights only load failed"):  # torch's text goes on to suggest unsafe loading: not ours
            reason = "it holds objects other than tensors, which np does not unpickle"
        raise _bad(f"Evaluation file {path} cannot be read without unpickling objects: {reason}",
                   "Store plain arrays: numpy.savez(path, inputs=X, labels=y) or torch.save({'inputs': X, "
                   "'labels': y}, path).") from None
    missing = [k for k in ("inputs", "labels") if not isinstance(data.get(k), torch.Tensor)]
    if missing:
        raise _bad(f"Evaluation file {path} has no {' or '.join(f'`{k}`' for k in missing)} array.",
                   "Store both: numpy.savez(path, inputs=X, labels=y).")
    inputs, labels = data["inputs"], data["labels"]
    if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise _bad(f"Evaluation labels in {path} must be a 1-D integer array, got {labels.dtype} of shape "
                   f"{tuple(labels.shape)}.", "Store class indices: labels = numpy.array([3, 0, 7, ...]).")
    if len(labels) == 0:
        raise _bad(f"Evaluation file {path} holds no samples.", "Store at least one labelled sample.")
    if inputs.shape[0:1] != labels.shape:
        raise _bad(f"Evaluation file {path} has {inputs.shape[0] if inputs.dim() else 0} inputs but "
                   f"{len(labels)} labels.", "Give one label per input.")
    return _fit(inputs, example, path, batched=True), labels.to(torch.int64)


def _class_label(names: list[str]) -> dict[str, int]:
    """Folder names that are all integers are the class indices themselves; otherwise sorted order gives them."""
    if all(n.isdigit() for n in names):
        return {n: int(n) for n in names}
    return {n: i for i, n in enumerate(sorted(names))}


def _read_image_folder(root: Path, example: torch.Tensor,
                       spec: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    import torch

    folders = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not folders:
        raise _bad(f"Evaluation dataset {root} has no class folders (expected {root}/<class>/*.png|jpg|npy).",
                   "Put each class's samples in a subfolder named after the class, or pass a .npz/.pt file.")
    labels_of = _class_label([d.name for d in folders])
    inputs, labels = [], []
    for folder in folders:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SAMPLE_SUFFIXES)
        if not files:
            raise _bad(f"Class folder {folder} holds no .png, .jpg, .bmp or .npy files.",
                       "Add samples to it or remove the folder.")
        for path in files:
            inputs.append(_read_sample(path, example, spec))
            labels.append(labels_of[folder.name])
    return torch.cat(inputs), torch.tensor(labels, dtype=torch.int64), [d.name for d in folders]


def _read_sample(path: Path, example: torch.Tensor, spec: dict[str, Any]) -> torch.Tensor:
    import numpy as np
    import torch

    if path.suffix.lower() == ".npy":
        try:
            return _fit(torch.from_numpy(np.load(path, allow_pickle=False)), example, path, batched=False)
        except ConfigError:
            raise
        except Exception as exc:
            raise _bad(f"Evaluation sample {path} cannot be read as a NumPy array: {first_line(exc)}") from None
    if example.dim() != 4:
        raise _bad(f"Evaluation image {path} given, but the model input {tuple(example.shape)} is not an image "
                   "(N, C, H, W).", "Use .npy samples or a .npz file shaped like the model input.")
    from PIL import Image

    channels = int(spec.get("channels", example.shape[1]))
    height, width = (spec.get("resize") or [int(example.shape[2]), int(example.shape[3])])
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB").resize((int(width), int(height)))
            array = np.asarray(image, dtype=np.float32) * float(spec.get("scale", 1 / 255))
    except Exception as exc:  # UnidentifiedImageError, OSError (truncated), DecompressionBombError
        raise _bad(f"Evaluation image {path} cannot be read: {first_line(exc)}") from None
    tensor = torch.from_numpy(array)
    tensor = tensor.unsqueeze(0) if channels == 1 else tensor.permute(2, 0, 1)
    mean = torch.tensor(spec.get("mean") or [0.0] * channels, dtype=torch.float32).reshape(-1, 1, 1)
    std = torch.tensor(spec.get("std") or [1.0] * channels, dtype=torch.float32).reshape(-1, 1, 1)
    return _fit((tensor - mean) / std, example, path, batched=False)


def _check_labels(labels: torch.Tensor, num_classes: int | None, where: Path,
                  classes: list[str] | None = None) -> None:
    if num_classes is None:
        return
    bad = labels[(labels < 0) | (labels >= num_classes)]
    if bad.numel():
        value = int(bad[0])
        named = ""
        if classes is not None:
            folder = next(c for c, label in _class_label(classes).items() if label == value)
            named = f" (class folder {str(where / folder)!r})"
        raise _bad(f"Evaluation labels in {where} go out of range: label {value}{named}, but the model gives "
                   f"{num_classes} class scores (labels 0..{num_classes - 1}).",
                   "Labels must be class indices of the model's output; name class folders 0..N-1 or fix the labels.")
