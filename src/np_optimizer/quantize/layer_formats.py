"""Per-layer formats of graph_quantize's `layers:` (module-path pattern -> format), resolved per graph node.

    formats = LayerFormats(scheme="W8-A8", layers=(("features.0", "W8-A16"), ("classifier", "float")),
                           float_modules=frozenset(), limit=backend.format_limit, target="ethos-u55-128")
    formats.choice(node_key(node))  ->  Choice(format="W8-A16", why="layers: 'features.0'", pattern="features.0")

A pattern names a module path as np report --layers shows it (`features.0`) and matches that module and everything
inside it; `*`, `?` and `[...]` are shell-style wildcards over the whole path (`layer*.conv1`, `*` for every layer,
ops outside any submodule included). The last matching pattern wins, as the backends' quantizers compose their
per-module configs; keep_float (and the layers advanced_quantize made) win over every pattern. The backend's own
limits (Backend.format_limit: int16 matmuls on Ethos-U55) come last: a layer that got the refused format from the
step's scheme gets the limit's format and its reason; one a pattern asked for it is refused (`refused`), so the user
hears it before anything compiles. Pure: no torch at import, so validation uses it too (nodes as NodeKeys).

The model's inputs and outputs have the reserved paths `<input>` (every user input of the program) and `<output>`
(the program's output node): a pattern of that exact name gives them a format, as `*` does. On Ethos-U the Arm
quantizer quantizes an input in its own format (an annotated placeholder), not its reader's: without `<input>` it is
the scheme's, so an int16 first layer still reads an input rounded to int8 (backends whose quantizer has no such
annotation refuse the two names: config/layer_formats.py, R045).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from np_optimizer.backends.base import FLOAT, FormatLimit

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["FLOAT", "INPUT", "OUTPUT", "IO_PATHS", "NodeKey", "Choice", "LayerFormats", "node_key", "program_keys",
           "pattern_matches", "nearest_paths", "FormatLimit"]

INPUT, OUTPUT = "<input>", "<output>"  # the model's inputs and its output, as `layers:` names them
IO_PATHS = (INPUT, OUTPUT)


@dataclass(frozen=True)
class NodeKey:
    """What a format depends on: the node's module paths (outermost first; `("",)` for an op outside every
    submodule), its op and its name (keep_float also takes node names)."""

    paths: tuple[str, ...]
    op: str
    name: str


@dataclass(frozen=True)
class Choice:
    format: str
    why: str  # "scheme W8-A8", "layers: 'features.0'", "keep_float", or the backend limit's reason
    pattern: str | None = None  # the `layers:` pattern that decided it, if one did
    limited: bool = False  # the backend's limit moved it from the format asked for


def _strip(path: str) -> str:
    prefix = "L['self']."  # older capture APIs; torch.export records "layer1.conv"
    return path[len(prefix):] if path.startswith(prefix) else path


def node_key(node: Any) -> NodeKey:
    """A graph node's key. A placeholder is a user input here: the quantizers see program.module(), where the weights
    are get_attr nodes."""
    if node.op in ("placeholder", "output"):
        return NodeKey((INPUT if node.op == "placeholder" else OUTPUT,), str(node.op), str(node.name))
    stack = node.meta.get("nn_module_stack") or {}
    paths = tuple(p for p in (_strip(str(path)) for path, _ in stack.values()) if p)
    return NodeKey(paths or ("",), str(node.target), str(node.name))


def program_keys(program: ExportedProgram) -> list[NodeKey]:
    """The keys of a program's user inputs, operator nodes and output, in graph order."""
    user_inputs = set(program.graph_signature.user_inputs)
    return [node_key(n) for n in program.graph.nodes
            if n.op in ("call_function", "output") or (n.op == "placeholder" and n.name in user_inputs)]


def pattern_matches(pattern: str, path: str) -> bool:
    """`features.0` matches features.0 and features.0.conv; a wildcard pattern matches a whole path."""
    if path == pattern or (path and path.startswith(pattern + ".")):
        return True
    return any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(path, pattern)


def nearest_paths(pattern: str, paths: Iterable[str], n: int = 3) -> list[str]:
    known = sorted({p for p in paths if p})
    return difflib.get_close_matches(pattern, known, n=n, cutoff=0.3) or known[:n]


class LayerFormats:
    """Each node's format: the scheme, then `layers` in order (the last match wins), then keep_float, then the
    backend's limit."""

    def __init__(self, scheme: str, layers: Iterable[tuple[str, str]] = (), float_modules: Iterable[str] = (),
                 limit: FormatLimit | None = None, target: str | None = None) -> None:
        self.scheme, self.layers = scheme, tuple(layers)
        self.float_modules, self.limit, self.target = frozenset(float_modules), limit, target

    def asked(self, key: NodeKey) -> Choice:
        """The format run.yaml asks for, before the backend's limit."""
        if key.name in self.float_modules or any(p in self.float_modules for p in key.paths):
            return Choice(FLOAT, "keep_float")
        choice = Choice(self.scheme, f"scheme {self.scheme}")
        for pattern, fmt in self.layers:
            if any(pattern_matches(pattern, p) for p in key.paths):
                choice = Choice(fmt, f"layers: {pattern!r}", pattern)
        return choice

    def choice(self, key: NodeKey) -> Choice:
        asked = self.asked(key)
        instead = self.limit(self.target, asked.format, key.op) if self.limit and asked.format != FLOAT else None
        return Choice(instead[0], instead[1], asked.pattern, limited=True) if instead else asked

    def refused(self, key: NodeKey) -> tuple[str, str] | None:
        """(pattern, the limit's reason) when a `layers:` pattern asked for a format the backend refuses here."""
        asked = self.asked(key)
        if asked.pattern is None or self.limit is None or asked.format == FLOAT:
            return None
        instead = self.limit(self.target, asked.format, key.op)
        return (asked.pattern, instead[1]) if instead else None

    def is_uniform(self, keys: Iterable[NodeKey]) -> bool:
        """Whether every node takes the scheme or float: the one-scheme quantizer with keep_float does it all."""
        return all(self.choice(k).format in (self.scheme, FLOAT) for k in keys)

    def unmatched(self, keys: Iterable[NodeKey]) -> list[str]:
        """The patterns that match no module of the program, in file order."""
        paths = {p for k in keys for p in k.paths}
        return [pattern for pattern, _ in self.layers if not any(pattern_matches(pattern, p) for p in paths)]

