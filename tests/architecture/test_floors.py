"""The floors of the house: every module of np_optimizer sits on one floor, and no import goes up a floor or closes
a cycle, counting every import (top level, inside functions and under TYPE_CHECKING).

The floors are read from docs/architecture.md (its "Floors" block), the one list. Run this file as a script to print
the whole report: `python tests/architecture/test_floors.py`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "np_optimizer"
DOC = ROOT / "docs" / "architecture.md"


def read_floors(doc: Path = DOC) -> dict[str, int]:
    """unit -> floor number, from the fenced block under the '## Floors' heading ('N: unit, unit, ...')."""
    text = doc.read_text(encoding="utf-8")
    section = text.split("\n## Floors", 1)[1]
    block = section.split("```", 2)[1]
    floors: dict[str, int] = {}
    for line in block.splitlines():
        match = re.match(r"\s*(\d+):\s*(.+?)\s*(?:#.*)?$", line)
        if match:
            for unit in match.group(2).split(","):
                floors[unit.strip()] = int(match.group(1))
    return floors


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def unit_of(module: str) -> str:
    """The top-level module or package of np_optimizer a module belongs to ('np_optimizer' for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the np_optimizer modules it imports, wherever the import statement stands."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join([*here, *([node.module] if node.module else [])])
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in mods else base)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in mods \
                    and not module.startswith(f"{node.value}."):  # (its own package is imported before it)
                targets = [node.value]  # a module named in a string (importlib, a registry's package) is imported too
            for target in targets:
                if target == "np_optimizer" or target.startswith("np_optimizer."):
                    resolved = resolve(target)
                    if resolved and resolved != module:
                        graph[module].add(resolved)
    return graph


def cycles(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            if unit_of(source) != unit_of(target):
                units[unit_of(source)].add(unit_of(target))
    return units


def upward_imports(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    return [f"{source} (floor {floors[unit_of(source)]}) imports {target} (floor {floors[unit_of(target)]})"
            for source, targets in sorted(graph.items()) for target in sorted(targets)
            if unit_of(source) in floors and unit_of(target) in floors
            and floors[unit_of(target)] > floors[unit_of(source)]]


def test_every_module_has_a_floor() -> None:
    floors = read_floors()
    units = {unit_of(m) for m in modules()}
    assert not sorted(units - floors.keys()), "modules with no floor in docs/architecture.md"
    assert not sorted(floors.keys() - units), "floors name modules that do not exist"


def test_no_import_goes_up_a_floor() -> None:
    assert upward_imports(import_graph(modules()), read_floors()) == []


def test_no_module_cycle() -> None:
    mods = modules()
    assert cycles(sorted(mods), import_graph(mods)) == []


def test_no_package_cycle() -> None:
    mods = modules()
    graph = unit_graph(import_graph(mods))
    assert cycles(sorted({unit_of(m) for m in mods}), graph) == []


def test_the_graph_reader_sees_lazy_type_checking_and_named_imports(tmp_path: Path) -> None:
    """The reader counts what ruff and mypy cannot see: imports inside functions, under TYPE_CHECKING, and modules
    named in strings (a registry's package, importlib)."""
    assert "np_optimizer.workspace.layout" in import_graph(modules())["np_optimizer.workspace"]
    graph = import_graph({"np_optimizer.a": _write(tmp_path / "a.py", "from typing import TYPE_CHECKING\n"
                                                   "if TYPE_CHECKING:\n    from np_optimizer.b import X\n"),
                          "np_optimizer.b": _write(tmp_path / "b.py", "def f():\n    from np_optimizer import a\n")})
    assert graph == {"np_optimizer.a": {"np_optimizer.b"}, "np_optimizer.b": {"np_optimizer.a"}}
    assert cycles(["np_optimizer.a", "np_optimizer.b"], graph) == [["np_optimizer.a", "np_optimizer.b"]]
    named = import_graph({"np_optimizer.c": _write(tmp_path / "c.py", 'R = Registry("x", package="np_optimizer.d")\n'),
                          "np_optimizer.d": _write(tmp_path / "d.py", "")})
    assert named == {"np_optimizer.c": {"np_optimizer.d"}}, "a module named in a string counts as an import"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


if __name__ == "__main__":
    mods = modules()
    graph = import_graph(mods)
    floors = read_floors()
    print("modules with no floor:", sorted({unit_of(m) for m in mods} - floors.keys()))
    print("file cycles:", *cycles(sorted(mods), graph), sep="\n  ")
    print("package cycles:", *cycles(sorted({unit_of(m) for m in mods}), unit_graph(graph)), sep="\n  ")
    print("imports up a floor:", *upward_imports(graph, floors), sep="\n  ")
    sys.exit(0)
