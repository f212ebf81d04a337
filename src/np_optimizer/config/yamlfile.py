"""YAML loading that keeps line numbers, so every issue can point at its place in the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from np_optimizer.config.issues import L_SYNTAX, ValidationIssue

__all__ = ["YamlDoc", "load_yaml"]


@dataclass
class YamlDoc:
    """The parsed data plus a map from YAML location (`steps[1].graph_quantize`) to (line, column), 1-based."""

    data: Any
    file: str
    marks: dict[str, tuple[int, int]] = field(default_factory=dict)

    def mark(self, location: str) -> tuple[int | None, int | None]:
        # Fall back to the nearest enclosing location that has a mark.
        loc = location
        while loc:
            if loc in self.marks:
                return self.marks[loc]
            cut = max(loc.rfind("."), loc.rfind("["))
            loc = loc[:cut] if cut > 0 else ""
        return (None, None)


def _collect_marks(node: yaml.Node, path: str, marks: dict[str, tuple[int, int]]) -> None:
    marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = f"{path}.{key_node.value}" if path else str(key_node.value)
            _collect_marks(value_node, child, marks)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_marks(item, f"{path}[{i}]", marks)


def load_yaml(path: Path) -> tuple[YamlDoc | None, list[ValidationIssue]]:
    """Parse `path`; a syntax error becomes one issue with file, line and column."""
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        problem = exc.problem or str(exc)
        return None, [
            ValidationIssue(
                code="Y001",
                level=L_SYNTAX,
                location="(file)",
                message=f"YAML syntax error in {path.name} at line {line}, column {column}: {problem}",
                hint="Check indentation and that every `key: value` pair is well formed at that line.",
                file=path.name,
                line=line,
                column=column,
            )
        ]
    marks: dict[str, tuple[int, int]] = {}
    if node is not None:
        _collect_marks(node, "", marks)
    data = yaml.safe_load(text)
    return YamlDoc(data=data, file=path.name, marks=marks), []
