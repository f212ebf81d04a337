"""The layer key: which layer of the user's model an op, a cost or an SNR belongs to (rows of the per-layer files)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from np_optimizer.records.codec import json_name

__all__ = ["LayerKey", "ROOT"]

ROOT = ""  # the module path of the model itself (ops written in its own forward)


@dataclass(frozen=True, order=True)
class LayerKey:
    """`module` is the dotted path in `named_modules()` ("" is the model itself); `cls` the class's short name."""

    __json_computed__: ClassVar[dict[str, str]] = {"key": "label"}
    __json_order__: ClassVar[tuple[str, ...]] = ("key", "module", "class", "family")

    module: str
    cls: str = field(metadata=json_name("class"))
    family: str

    @property
    def label(self) -> str:
        """What the user reads: the module path, or `(model).<family>` for ops of the model's own forward."""
        return self.module if self.module != ROOT else f"(model).{self.family}"
