"""A status is compared with its enum's members, never with a string: mypy strict flags a misspelled member
(`JobStatus.SUCESS`) but not a misspelled string against a StrEnum (`record.status == "sucess"` type-checks, since a
StrEnum is a str). So every comparison of a `status` attribute, key or variable with a string constant in src/ is
refused here, except the words of other tools and views listed below (they are not np's status kinds).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "np_optimizer"
# (module, the string): a view word or another tool's status, not one of records/status.py's kinds
NOT_NP_STATUSES = {
    ("report/tables.py", "unreadable"),  # np report's word for an experiment whose files cannot be read
    ("adapters/mlia.py", "ok"),  # MLIA's own JSON
}


def _is_status(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "status"
    if isinstance(node, ast.Name):
        return node.id == "status"
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value == "status"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "status"
    return False


def string_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, string) of each `status == "..."` / `!=` / `in ("...", ...)` in the source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if not any(_is_status(side) for side in sides):
            continue
        for side in sides:
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            found += [(node.lineno, i.value) for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return found


def test_the_check_finds_string_comparisons() -> None:
    assert string_comparisons('if job.status == "sucess": pass') == [(1, "sucess")]
    assert string_comparisons('ok = r.get("status") != "SUCCESS" or status in ("a", "b")') == [
        (1, "SUCCESS"), (1, "a"), (1, "b")]
    assert string_comparisons("if job.status == JobStatus.SUCCESS: pass") == []


def test_statuses_are_compared_with_their_enum_members() -> None:
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, text in string_comparisons(path.read_text()):
            if (module, text) not in NOT_NP_STATUSES:
                offences.append(f"{module}:{line}: status compared with {text!r}")
    assert offences == [], "compare with the member of records/status.py instead:\n" + "\n".join(offences)
