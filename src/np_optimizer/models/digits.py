"""The digits sample: a small CNN trained in seconds on scikit-learn's 8x8 handwritten digits (1,797 labelled images,
shipped inside scikit-learn: nothing is downloaded), with a seeded train / validation split.

`python -m np_optimizer.models.digits OUTDIR` writes the files the `sample_digits` project ships with (see
np_optimizer/sample_data/): the exported model, the held-out validation split and calibration samples from the
training split. Tests train the same model themselves (tests/evaluate/test_evaluate_digits.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DigitsSplit", "load_split", "train_digits_cnn", "write_sample_files", "accuracy"]


@dataclass
class DigitsSplit:
    train_x: Any  # float32 (N, 1, 8, 8) in 0..1: uint8 pixels / 255, as an 8-bit image file gives them
    train_y: Any  # int64 (N,)
    val_x: Any
    val_y: Any
    val_u8: Any  # uint8 (N, 8, 8): the validation images as they are written to PNG files


def load_split(seed: int = 0, val_fraction: float = 0.2) -> DigitsSplit:
    """The 1,797 digits, pixels 0..16 mapped to 8-bit (0..255), split by a seeded permutation."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)
    order = np.random.default_rng(seed).permutation(len(images))
    cut = int(len(images) * (1 - val_fraction))
    train, val = order[:cut], order[cut:]
    labels = torch.from_numpy(digits.target.astype(np.int64))

    def as_input(idx: Any) -> Any:
        return torch.from_numpy(images[idx].astype(np.float32) / 255.0).unsqueeze(1)

    return DigitsSplit(as_input(train), labels[train], as_input(val), labels[val], images[val])


def _model() -> Any:
    from torch import nn

    class DigitsCNN(nn.Module):
        # a module of its own, not nn.Sequential: Sequential's input placeholder is named `input_1` after export,
        # which np's graph editor trips over in graph_quantize (KeyError: 'input_1'; left for a separate fix)
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1),
                                          nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x: Any) -> Any:
            return self.classifier(self.features(x).flatten(1))

    return DigitsCNN()


def accuracy(model: Any, x: Any, y: Any) -> float:
    import torch

    with torch.no_grad():
        return float((model(x).argmax(-1) == y).float().mean())


def train_digits_cnn(split: DigitsSplit, *, seed: int = 0, epochs: int = 10) -> Any:
    """Adam, batch 32, seeded, one thread (small convolutions lose time to thread hand-offs on a busy machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(split, seed, epochs)
    finally:
        torch.set_num_threads(threads)


def _train(split: DigitsSplit, seed: int, epochs: int) -> Any:
    import torch

    torch.manual_seed(seed)
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        model.train()
        for batch in torch.randperm(len(split.train_y), generator=generator).split(32):  # type: ignore[no-untyped-call]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(split.train_x[batch]), split.train_y[batch])
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
    return model.eval()


def write_sample_files(out: Path, *, seed: int = 0, calibration: int = 64) -> dict[str, float]:
    """digits.pt2 (batch 1), digits_val.npz (inputs, labels) and digits_calibration.npz (inputs) in `out`."""
    import numpy as np
    import torch

    split = load_split(seed)
    model = train_digits_cnn(split, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    torch.export.save(torch.export.export(model, (split.val_x[:1],)), out / "digits.pt2")
    np.savez_compressed(out / "digits_val.npz", inputs=split.val_x.numpy(), labels=split.val_y.numpy())
    np.savez_compressed(out / "digits_calibration.npz", inputs=split.train_x[:calibration].numpy())
    return {"val_accuracy": accuracy(model, split.val_x, split.val_y), "val_samples": float(len(split.val_y))}


if __name__ == "__main__":
    figures = write_sample_files(Path(sys.argv[1] if len(sys.argv) > 1 else "src/np_optimizer/sample_data"))
    print(f"validation accuracy {figures['val_accuracy']:.4f} on {int(figures['val_samples'])} samples")
