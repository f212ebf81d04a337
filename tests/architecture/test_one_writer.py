"""One writer per experiment folder: only workspace/store.py writes job.json, report.json and meta.json.

Every module of np_optimizer is read with `ast`: a call that writes a file (write_json, write_text, write_bytes,
update_json, json.dump, open in a writing mode) must not name one of the three files, the Experiment paths to them
(`meta_file`, `report_file`) or the store's `job_file`, directly or through a variable assigned from one.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "np_optimizer"
THE_STORE = PACKAGE / "workspace" / "store.py"
FILES = ("job.json", "report.json", "meta.json", "meta_file", "report_file", "job_file")
WRITERS = {"write_json", "write_text", "write_bytes", "update_json", "dump"}


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _writes(call: ast.Call) -> bool:
    name = _callee(call)
    if name == "open":  # open(path, "w"), path.open("a"): a mode with w, a, x or +
        modes = [a for a in call.args[1:] if isinstance(a, ast.Constant)] if isinstance(call.func, ast.Name) else \
            [a for a in call.args if isinstance(a, ast.Constant)]
        modes += [k.value for k in call.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
        return any(isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes)
    return name in WRITERS


def _names(text: str) -> bool:
    return any(f in text for f in FILES)


def writers_of_experiment_files(source: str) -> list[int]:
    """The lines of `source` that write job.json, report.json or meta.json."""
    tree = ast.parse(source)
    tainted = set()  # variables that hold a path to one of the files
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _names(ast.unparse(node.value)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            tainted |= {t.id for t in targets if isinstance(t, ast.Name)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _writes(node):
            said = ast.unparse(node)
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if _names(said) or used & tainted:
                lines.append(node.lineno)
    return sorted(lines)


def test_the_check_finds_a_writer() -> None:
    caught = [
        'write_json(root / "meta.json", {"status": "created"})',
        "write_json(exp.meta_file, meta)",
        'path = exp.root / "report.json"\nwrite_json(path, report)',
        "target = store.job_file(name)\nwith open(target, 'w') as f:\n    json.dump(data, f)",
        "exp.report_file.write_text('{}')",
        'update_json(exp.root / "01_step" / "job.json", change)',
    ]
    for source in caught:
        assert writers_of_experiment_files(source), source
    passed = ['data = read_json(job_dir / "job.json")', 'write_json(root / "compile.json", record)',
              'with open(exp.meta_file) as f:\n    json.load(f)', 'exists = (child / "meta.json").exists()']
    for source in passed:
        assert writers_of_experiment_files(source) == [], source


def test_only_the_store_writes_job_report_and_meta_json() -> None:
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py")) if path != THE_STORE
             for line in writers_of_experiment_files(path.read_text(encoding="utf-8"))]
    assert found == [], "write job.json, report.json and meta.json through ExperimentStore's verbs"
    assert writers_of_experiment_files(THE_STORE.read_text(encoding="utf-8"))  # the store is found by the check
