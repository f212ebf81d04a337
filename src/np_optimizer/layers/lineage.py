"""Which layer of one checkpoint a layer of an earlier one became. No torch: works on `LayerGraph`, plain data that
numerics.py builds from an exported program.

A step that fuses or removes modules makes layer keys vanish: a batch norm folded into the convolution before it
(graph_optimize's fuse_conv_bn, and PT2E's own folding in graph_quantize), a copy or a permute pair removed, a dead
branch dropped. The map says where each vanished key went: to the one layer that fed it when its value is now that
layer's (`bn` -> `conv`), or to nothing when its work is gone (dead code). Keys that survive are left out of the map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["INPUT", "LayerGraph", "module_map", "compose", "translate"]

INPUT = "<input>"  # the producer of a layer fed by the model's own inputs

KeyMap = Mapping[str, "str | None"]


@dataclass
class LayerGraph:
    """The layers of one program, in the order their first op appears. `outputs`: the op whose result is the layer's
    output (its last compute op with a float result); `producers`: the layers (or INPUT) feeding it; `live`: layers
    whose ops reach the program's outputs."""

    labels: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)  # label -> index of its output op in graph order
    producers: dict[str, set[str]] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    info: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> to_dict(LayerKey)
    int8_step: dict[str, float] = field(default_factory=dict)  # label -> scale of its output's per-tensor dequantize


def module_map(before: LayerGraph, after: LayerGraph) -> dict[str, str | None]:
    """Old key -> new key (or None) for every key of `before` that `after` no longer has.

    A vanished layer whose result still reaches the outputs and that was fed by exactly one layer maps to where that
    layer went (its value is now the feeding layer's: a folded BN, a removed copy); any other vanished layer maps to
    None (its work is gone, or cannot be pinned on one layer)."""
    present = set(after.labels)
    out: dict[str, str | None] = {}
    for label in before.labels:
        if label in present:
            continue
        feeding = before.producers.get(label, set()) - {label}
        if label not in before.live or len(feeding) != 1 or INPUT in feeding:
            out[label] = None
            continue
        source = next(iter(feeding))
        out[label] = source if source in present else out.get(source)
    return out


def compose(first: KeyMap, second: KeyMap) -> dict[str, str | None]:
    """The map of two steps in a row (A -> B, then B -> C) as one map A -> C, again listing vanished keys only."""
    out: dict[str, str | None] = dict(second)
    for old, new in first.items():
        out[old] = None if new is None else second.get(new, new)
    return out


def translate(labels: Iterable[str], base_map: KeyMap, other_map: KeyMap) -> dict[str, str | None]:
    """Keys of checkpoint B (reached from INPUT_MODEL by `base_map`) as keys of checkpoint O (by `other_map`): a key
    of B is INPUT_MODEL's key of the same name, or the keys B fused into it; their key in O is the first of those
    that O still has. Both maps are the checkpoints' maps from INPUT_MODEL."""
    out: dict[str, str | None] = {}
    for label in labels:
        sources = [label, *(old for old, new in base_map.items() if new == label)]
        found = [other_map.get(s, s) for s in sources]
        out[label] = next((f for f in found if f is not None), None)
    return out
