"""Small modules with one job: no module of np_optimizer over 400 lines, and no function over 60 lines unless its
docstring (or, where the docstring is user-facing help text, a comment on its `def` line) says why
("Long because: ...")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "np_optimizer"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
REASON = "Long because:"


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_modules() -> list[str]:
    return [f"{p.relative_to(PACKAGE)}: {n} lines" for p in _sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]


def long_functions_without_reason() -> list[str]:
    found = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                def_line = lines[node.lineno - 1]
                if length > MAX_FUNCTION_LINES and REASON not in (ast.get_docstring(node) or "") + def_line:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_over_400_lines() -> None:
    assert long_modules() == []


def test_no_function_over_60_lines_without_a_reason() -> None:
    assert long_functions_without_reason() == []
