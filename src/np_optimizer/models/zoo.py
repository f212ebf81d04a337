"""Built-in model definitions (torch). Each builder returns (model in eval mode, example inputs), seeded.

Also FlatInputs: a factory's model whose example inputs nest, wrapped to take them as one flat tuple of tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["build_builtin", "SmallCNN", "MobileNetV2Tiny", "MLP", "FlatInputs"]


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)  # type: ignore[no-any-return]  # nn.Module.__call__ returns Any


class SmallCNN(nn.Module):
    """The sample model: stem, two residual stages, global pooling, a linear classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.block1 = ResidualBlock(32)
        self.down = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        self.block2 = ResidualBlock(64)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.down(self.block1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))  # type: ignore[no-any-return]  # nn.Module.__call__ returns Any


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_skip = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.use_skip else y  # type: ignore[no-any-return]  # nn.Module.__call__ returns Any


class MobileNetV2Tiny(nn.Module):
    """A width-reduced MobileNetV2: the same block structure, fewer and narrower stages."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 1),
            InvertedResidual(16, 24, 2, 6),
            InvertedResidual(24, 24, 1, 6),
            InvertedResidual(24, 32, 2, 6),
            InvertedResidual(32, 32, 1, 6),
            InvertedResidual(32, 64, 2, 6),
        )
        self.head = nn.Sequential(nn.Conv2d(64, 256, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU6())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(256, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))  # type: ignore[no-any-return]  # nn.Module.__call__ returns Any


class MLP(nn.Module):
    def __init__(self, features: int = 64, hidden: int = 256, num_classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]  # nn.Module.__call__ returns Any


def _randomize_bn(model: nn.Module, generator: torch.Generator) -> None:
    # Fresh BatchNorm layers are identities; give them trained-looking statistics so BN fusion matters.
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            n = module.num_features
            # the built-in models' BatchNorm layers keep the default track_running_stats=True
            assert module.running_mean is not None and module.running_var is not None
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            module.weight.data.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            module.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


def _built(model: nn.Module, shape: tuple[int, ...], seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(seed + 1)
    _randomize_bn(model, generator)
    return model.eval(), (torch.randn(*shape, generator=generator),)


def small_cnn(seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    return _built(SmallCNN(), (1, 3, 32, 32), seed)


def mobilenet_v2_tiny(seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    return _built(MobileNetV2Tiny(), (1, 3, 96, 96), seed)


def mlp(seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    return _built(MLP(), (1, 64), seed)


def tiny_llm(seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from np_optimizer.models.llm import build_tiny_llm

    return build_tiny_llm(seed)


_BUILDERS: dict[str, Callable[[int], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "small_cnn": small_cnn,
    "mobilenet_v2_tiny": mobilenet_v2_tiny,
    "mlp": mlp,
    "tiny_llm": tiny_llm,
}


class FlatInputs(nn.Module):
    """`model` called with its nested inputs rebuilt from flat tensors (the structure torch's pytree recorded): np's
    checkpoints, datasets and programs hold inputs as one flat tuple of tensors. The module path gains `model.`."""

    def __init__(self, model: nn.Module, structure: Any) -> None:
        super().__init__()
        self.model = model
        self.structure = structure

    def forward(self, *tensors: torch.Tensor) -> Any:
        from np_optimizer.adapters.torch_private import tree_unflatten

        return self.model(*tree_unflatten(list(tensors), self.structure))


def build_builtin(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from np_optimizer.models.catalog import get_builtin

    return _BUILDERS[get_builtin(name).builder](seed)
