"""The command line is thin: a command module parses, calls the API and renders. np sweep's module names nothing of
the sweep's machinery (the pool, the Ray address, sweep.yaml and Ctrl+C are the API's), and no command module reaches
below the API into the runner, the pipeline, the profiler, the compiler, the workspace or the sweep."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "np_optimizer" / "cli"
BELOW_THE_API = ("sweep", "runner", "pipeline", "profiler", "compile", "workspace")


def _imported(path: Path) -> set[str]:
    """Every np_optimizer module a file imports, wherever the import stands (functions, TYPE_CHECKING)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {name for name in found if name.startswith("np_optimizer.")}


def test_np_sweep_calls_the_api_only() -> None:
    imported = _imported(CLI / "cmd_sweep.py")
    assert not [m for m in imported if m.startswith("np_optimizer.sweep")], imported
    allowed = ("np_optimizer.api", "np_optimizer.cli", "np_optimizer.errors", "np_optimizer.records")
    assert [m for m in imported if not m.startswith(allowed)] == [], imported


def test_no_command_module_reaches_below_the_api() -> None:
    modules = sorted(CLI.glob("cmd_*.py"))
    assert len(modules) >= 12
    reached = {path.name: sorted(m for m in _imported(path) if m.split(".")[1] in BELOW_THE_API)
               for path in modules}
    assert {name: found for name, found in reached.items() if found} == {}
