"""YAML loading that keeps line numbers, so every issue can point at its place in the file, and that bounds the work.

Every YAML file np reads (run.yaml, run.detail.yaml, devices.yaml) goes through `read_yaml`, which reads the bytes
itself and refuses, as one `YamlProblem` with file, line, column and a hint:

- a file that is not UTF-8 text (binary, Latin-1), a folder in its place, or one over `MAX_BYTES`;
- YAML syntax errors, and YAML the safe loader cannot build: tags such as `!!python/object`, keys that are lists or
  mappings, keys that are not text (`1:`, `null:`), keys given twice in one mapping;
- hostile YAML: nesting deeper than `MAX_DEPTH`, and aliases (`*name`) whose expansion would exceed `MAX_NODES`
  values (a "billion laughs" of a few hundred bytes) or refers to itself. The expanded size is counted on the composed
  node graph with each anchor's size computed once, so the check itself costs time linear in the file.

`load_yaml` turns a problem into one validation issue (Y001 syntax, Y003 not text, Y004 unsupported YAML, Y005 too
large or too deep) for run.yaml and run.detail.yaml; devices.yaml turns it into a ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from np_optimizer.config.issues import L_SYNTAX, ValidationIssue

__all__ = ["YamlDoc", "YamlProblem", "load_yaml", "read_yaml", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES"]

MAX_BYTES = 1 << 20  # 1 MiB: a run.yaml is a few hundred bytes, a complete run.detail.yaml a few KiB
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_NODES = 10_000  # values after alias expansion (a complete run.detail.yaml has about a hundred)


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


class YamlProblem(Exception):
    """A YAML file np does not read: `code` (Y001, Y003, Y004, Y005), the message (with the path), a hint, and the
    1-based line and column when known."""

    def __init__(self, code: str, message: str, hint: str, *, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.line = line
        self.column = column


def _where(mark: Any) -> tuple[int | None, int | None]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


class _TooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        super().__init__("too deep")
        self.mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader with a nesting limit while composing (PyYAML composes recursively: thousands of `[` end in a
    RecursionError otherwise)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(root: yaml.Node, path: Path) -> None:
    """Raise YamlProblem when the document, aliases expanded, is deeper than MAX_DEPTH, holds more than MAX_NODES
    values, or an alias refers to a node that contains it. Each node is sized once (aliases share nodes), so this is
    linear in the composed graph, and its recursion is bounded by MAX_DEPTH."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        line, column = _where(node.start_mark)
        if key in open_nodes:
            raise YamlProblem("Y004", f"{path} has an alias (*name) inside the value it names (line {line}): it never "
                              "ends.", "Write the value out instead of referring to itself.", line=line, column=column)
        if depth > MAX_DEPTH:
            raise YamlProblem("Y005", f"{path} nests deeper than {MAX_DEPTH} levels (line {line}), counting aliases.",
                              "np's YAML files are a few levels deep; check the file is the one np wrote.",
                              line=line, column=column)
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise YamlProblem("Y005", f"{path} expands to more than {MAX_NODES:,} values (line {line}): its "
                                  "aliases (*name) repeat anchored values (&name) too many times.",
                                  "Write the values out, or use fewer aliases; np's YAML files need none.",
                                  line=line, column=column)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    size(root, 1)


_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"  # `<<: *defaults`


def _check_keys(node: yaml.Node, path: Path, seen: set[int]) -> None:
    """Keys are text, and none is given twice in one mapping (PyYAML would silently keep the last)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            line, column = _where(key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in (_STR, _MERGE):
                shown = f"the key '{key_node.value}'" if isinstance(key_node, yaml.ScalarNode) else \
                    "a key that is a list or mapping"
                raise YamlProblem("Y004", f"{path} line {line}: {shown} is not text; every key in np's YAML files "
                                  "is a name.", "Write the key as a name (quote it, e.g. \"1\": ..., if it "
                                  "looks like a number, true/false or null).", line=line, column=column)
            if key_node.value in first and key_node.tag == _STR:
                raise YamlProblem("Y004", f"{path} line {line}: the key '{key_node.value}' is given twice in one "
                                  f"mapping (first at line {first[key_node.value]}).",
                                  "Keep one of them: YAML keeps only the last, silently.", line=line, column=column)
            first[key_node.value] = line or 0
            _check_keys(value_node, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_keys(item, path, seen)


_WRITERS = {"run.yaml": " (`np experiments create` writes a new run.yaml)",
            "run.detail.yaml": " (`np experiments detail` writes a complete run.detail.yaml)"}


def _not_yaml_hint(path: Path) -> str:
    return f"Save {path.name} as UTF-8 text. If it is damaged, restore it or write it again{_WRITERS.get(path.name, '')}."


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """The data in `path` and its composed node graph (None for an empty file), or YamlProblem; see the module."""
    if path.is_dir():
        raise YamlProblem("Y003", f"{path} is a folder; np expects a YAML file there.",
                          f"Remove or rename the folder and put the YAML file {path.name} in its place.")
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise YamlProblem("Y005", f"{path} is larger than {MAX_BYTES // 1024} KiB; np's YAML files are a few KiB.",
                          _not_yaml_hint(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = raw[:exc.start].count(b"\n") + 1
        raise YamlProblem("Y003", f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {bad_line}).",
                          _not_yaml_hint(path), line=bad_line) from exc
    loader: _BoundedLoader | None = None
    try:
        try:
            loader = _BoundedLoader(text)  # the reader checks for control characters here
            node = loader.get_single_node()
        except _TooDeep as exc:
            line, column = _where(exc.mark)
            raise YamlProblem("Y005", f"{path} nests deeper than {MAX_DEPTH} levels (line {line}).",
                              "np's YAML files are a few levels deep; check the file is the one np wrote.",
                              line=line, column=column) from None
        except yaml.MarkedYAMLError as exc:
            line, column = _where(exc.problem_mark or exc.context_mark)
            problem = exc.problem or str(exc).splitlines()[0]
            raise YamlProblem("Y001", f"YAML syntax error in {path.name} at line {line}, column {column}: {problem}",
                              "Check indentation and that every `key: value` pair is well formed at that line.",
                              line=line, column=column) from None
        except yaml.YAMLError as exc:  # the reader's own errors: control characters, NUL bytes
            mark = getattr(exc, "position", None)
            line = text[:mark].count("\n") + 1 if isinstance(mark, int) else None
            raise YamlProblem("Y003", f"{path} is not a YAML text file: {str(exc).splitlines()[0]}"
                              + (f" (line {line})." if line else "."), _not_yaml_hint(path), line=line) from None
        if node is None:
            return None, None
        _expanded_size(node, path)
        _check_keys(node, path, set())
        try:
            data = loader.construct_document(node)
        except yaml.MarkedYAMLError as exc:
            line, column = _where(exc.problem_mark or exc.context_mark)
            problem = exc.problem or str(exc).splitlines()[0]
            raise YamlProblem("Y004", f"{path} line {line}: {problem}; np reads plain YAML only (mappings, lists, "
                              "text, numbers, true/false, null).",
                              "Remove the tag (`!!...` or `!...`) or write the value as plain text.",
                              line=line, column=column) from None
        except (ValueError, TypeError, OverflowError) as exc:  # a tagged value that does not convert (!!int "x")
            raise YamlProblem("Y004", f"{path}: a value np cannot read ({exc}).",
                              "Remove the tag (`!!...`) or write the value as plain text.") from None
        return data, node
    finally:
        if loader is not None:
            loader.dispose()


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
    """Parse `path`; anything `read_yaml` refuses becomes one issue with file, line and column."""
    try:
        data, node = read_yaml(path)
    except YamlProblem as problem:
        return None, [ValidationIssue(code=problem.code, level=L_SYNTAX, location="(file)", message=problem.message,
                                      hint=problem.hint, file=path.name, line=problem.line, column=problem.column)]
    except OSError as exc:
        return None, [ValidationIssue(code="Y003", level=L_SYNTAX, location="(file)",
                                      message=f"{path} cannot be read: {exc.strerror or exc}.",
                                      hint=f"Check that {path.name} is a readable file.", file=path.name)]
    marks: dict[str, tuple[int, int]] = {}
    if node is not None:
        _collect_marks(node, "", marks)
    return YamlDoc(data=data, file=path.name, marks=marks), []
