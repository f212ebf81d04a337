"""Target rewrites: graph_optimize passes that replace a pattern the run's target refuses with an equivalent it takes,
so that a layer the partitioner would leave on the CPU lowers into the delegate.

A rewrite has the form `rewrite(ep, target) -> PassResult` (graph/passes.py's contract: the input never mutated, an
unchanged program returned as itself) and applies only where the target would refuse the pattern: a backend lists the
rewrites for its partitioner (Backend.rewrites), and each one mirrors that partitioner's own support check
(ExecuTorch's backends/arm/operator_support, backends/xnnpack/partition/config) down to the target profile, so a
pattern the target takes is left as it is. The graph_optimize step runs them after the generic passes and checks
their outputs with the same tolerance. Each entry also names the partitioner reasons it answers (`fixes`, a regular
expression), so that the reason line of a run without graph_optimize can name the rewrite that would fix a layer.

Why a registry of their own (registry.Registry, "graph rewrite"), not entries of passes.PASSES: they are another
extension point, chosen by the target and given it, and the reason line looks them up by the reasons they fix. Its
entries are found by package discovery: one module per family of patterns (pools.py, masks.py) registers its
rewrites with `register_rewrite`. torch is imported inside functions only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from np_optimizer.graph.passes import PassResult
from np_optimizer.registry import Registry

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

__all__ = ["Target", "Rewrite", "REWRITES", "register_rewrite", "rewrites_of", "rewrite_for", "touched_layers",
           "replacement_meta", "pair"]


class Target(NamedTuple):
    """What a rewrite needs of the run's device besides its backend (which chooses the rewrites: Backend.rewrites):
    the NPU's target profile ("ethos-u55-128", "ethos-u85-256"), None for a CPU."""

    npu: str | None = None

    @property
    def is_u55(self) -> bool:
        return (self.npu or "").startswith("ethos-u55")


@dataclass(frozen=True)
class Rewrite:
    """A registered rewrite: its name (job.json's `changes.passes[].pass`), the function, the partitioner reasons it
    answers (a regular expression) and the layers it can change, in words (the reason line's advice says it)."""

    name: str
    run: Callable[[ExportedProgram, Target], PassResult]
    fixes: str
    scope: str


REWRITES: Registry[Rewrite] = Registry("graph rewrite", package="np_optimizer.graph.rewrites")


def register_rewrite(rewrite: Rewrite) -> Rewrite:
    """Add a rewrite to the registry (from its module, imported when the registry is first read). graph_optimize runs
    them in registration order: the modules' in name order, each module's in its own order."""
    return REWRITES.register(rewrite.name, rewrite)


def rewrites_of(names: tuple[str, ...]) -> list[Rewrite]:
    """The registered rewrites a backend lists (Backend.rewrites), in registration order."""
    return [r for r in REWRITES.entries() if r.name in names]


def rewrite_for(reason: str) -> Rewrite | None:
    """The rewrite that answers a partitioner's reason, if one does."""
    return next((r for r in REWRITES.entries() if re.search(r.fixes, reason)), None)


def touched_layers(nodes: list[Node]) -> list[str]:
    """The module paths (nn_module_stack's innermost entry) of the nodes a rewrite replaced, in order, once each."""
    out: list[str] = []
    for node in nodes:
        stack = node.meta.get("nn_module_stack") or {}
        path = str(list(stack.values())[-1][0]) if stack else ""
        # an op of the model's own forward: named as the per-layer views name it (records/layers.py's LayerKey)
        path = path or f"(model).{getattr(node.target, '_opname', node.name)}"
        if path not in out:
            out.append(path)
    return out


def replacement_meta(node: Node, new: Node) -> None:
    """The replaced node's provenance (module stack, source, stack trace) on a node that replaces it, so the layer
    keeps its module path in the per-layer views; meta['val'] comes from refresh_meta."""
    for key in ("nn_module_stack", "source_fn_stack", "stack_trace", "from_node", "torch_fn"):
        if key in node.meta:
            new.meta[key] = node.meta[key]


def pair(value: Any, default: Any) -> tuple[int, int]:
    """A pooling argument (an int or a list of one or two) as (rows, columns); `default` where it is empty."""
    value = default if value in (None, [], ()) else value
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return (int(items[0]), int(items[-1]))
