"""Backend, profiling method and step names appear as strings only in their own modules and the device catalogue:
what a view or a phase needs to know about one is a property of its registered object, never a test of its name."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "np_optimizer"
CATALOGUE = "devices/catalog.py"
# A name that is also something else: the string stands for that, not for the registered entry.
OTHER_MEANINGS = {
    ("profiler/session.py", "mlia"): "the MLIA distribution, whose version each profile round records",
    ("adapters/mlia.py", "mlia"): "MLIA's logger",
    ("sweep/ray_pool.py", "mlia"): "the MLIA distribution, whose version every Ray node must share",
    ("backends/ethos_u.py", "mlia"): "the MLIA distribution, whose version decides the Ethos-U compile (Vela config)",
    ("pipeline/steps/graph_quantize.py", "advanced_quantize"): "job.json's source label of layers the AQ step made",
}


def registered_names() -> dict[str, set[str]]:
    """name -> the modules (relative to the package) allowed to spell it."""
    from np_optimizer.backends import backends
    from np_optimizer.config.steps import step_specs
    from np_optimizer.profiler.methods import registered_methods

    owners: dict[str, set[str]] = {}
    for backend in backends():
        owners[backend.name] = {f"backends/{backend.name.replace('-', '_')}.py", CATALOGUE}
    for method in registered_methods():
        owners[method] = {f"profiler/methods/{method.replace('-', '_')}.py", CATALOGUE}
    for spec in step_specs():
        owners[spec.kind] = {f"pipeline/steps/{spec.kind}.py", CATALOGUE}
    return owners


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def misplaced_names() -> list[str]:
    owners = registered_names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                allowed = owners.get(node.value)
                if allowed is not None and relative not in allowed and (relative, node.value) not in OTHER_MEANINGS:
                    found.append(f"{relative}:{node.lineno} '{node.value}'")
    return found


def test_names_stay_in_their_own_modules() -> None:
    assert misplaced_names() == []


def test_the_scan_finds_a_name_where_it_does_not_belong(tmp_path: Path) -> None:
    tree = ast.parse('"""Docstrings may name xnnpack."""\nUSE = "xnnpack"\n')
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in _docstrings(tree)]
    assert constants == ["xnnpack"] and "xnnpack" in registered_names()
