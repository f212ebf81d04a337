"""Help texts, exit codes, JSON error shape, and the commands that must start without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from np_optimizer.docgen.compatibility import render_compatibility
from tests.helpers import REPO

COMMANDS = [
    [], ["workspace", "init"], ["projects", "create"], ["projects", "ls"], ["projects", "info"], ["models", "ls"],
    ["experiments", "create"], ["experiments", "detail"], ["experiments", "ls"], ["experiments", "info"],
    ["devices", "ls"], ["validate"], ["run"], ["profile"], ["report"], ["compare"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "np")
def test_help_has_description_and_example(run_np, command: list[str]) -> None:
    result = run_np(*command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.stdout
    assert len(result.stdout.strip().splitlines()) > 3


@pytest.mark.parametrize(("command", "text"), [(["profile"], "Checkpoint names"),
                                             (["workspace", "init"], "Folder of the workspace")])
def test_arguments_have_help(run_np, command: list[str], text: str) -> None:
    # click 8.5 drops the help typer gives an argument: the pin in requirements.lock keeps it
    assert text in " ".join(run_np(*command, "--help").stdout.split())


def test_unknown_command_is_usage_error(run_np) -> None:
    result = run_np("frobnicate")
    assert result.exit_code == 2 and "No such command 'frobnicate'" in result.stderr
    said = run_np("statu").stderr  # the root builds its commands lazily, all for a typo
    assert said.count("Did you mean 'status'") == 1, said  # once: click says it, typer must not say it again
    said = run_np("projects", "creat").stderr
    assert said.count("Did you mean 'create'") == 1, said


def test_version_is_the_packages(run_np) -> None:
    """np --version prints a constant (no package metadata read at start): pyproject.toml's version."""
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert run_np("--version").stdout == f"np {version}\n"


def test_compatibility_doc_matches_the_catalogue() -> None:
    committed = (REPO / "docs" / "compatibility.md").read_text()
    assert committed == render_compatibility(), "docs/compatibility.md is stale: run `make docs`"


@pytest.mark.parametrize("args", [["devices", "ls"], ["validate"], ["run", "--dry-run"], ["models", "ls"]])
def test_light_commands_do_not_import_torch(cpu_experiment: Path, args: list[str]) -> None:
    code = (
        "import sys\n"
        "from np_optimizer.cli.main import main\n"
        f"rc = main({args!r})\n"
        "heavy = [m for m in ('torch', 'executorch', 'mlia', 'torchao') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=cpu_experiment, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout


# The --json shapes (README "JSON output"): top-level keys per command. A key removed or renamed breaks scripts.
RECORD_KEYS = {
    "workspace": ["root", "created", "projects", "skipped", "schema_version"],
    "project": ["name", "path", "device", "runtime", "backend", "model", "calibration_dataset", "created_at",
                "experiments", "schema_version"],
    "model": ["name", "description", "task", "inputs", "builder"],
    "device": ["device", "display_name", "runtime", "backend", "chipset", "architecture", "memory", "mlia_target",
               "methods", "notes"],
    "experiment": ["name", "path", "project", "device", "steps", "profile", "status", "created_at", "updated_at",
                   "jobs", "schema_version"],
    "validation": ["experiment", "is_valid", "issues", "plan", "schema_version", "notes"],
    "status": ["experiment", "status", "jobs", "measurements", "log"],
    "status_job": ["name", "step_type", "step_index", "checkpoint", "status", "duration_s", "started_at", "ended_at",
                   "lowering", "lowering_reason", "errors", "reused_from"],
    "status_measurement": ["checkpoint", "trigger", "status", "method", "result_kind", "device", "started_at",
                           "measurement_id"],
    "export": ["level", "folder", "checkpoint", "job", "device", "files"],
    "run": ["experiment", "status", "duration_s", "jobs", "profile", "error", "evaluation"],
    "profile": ["experiment", "device", "method", "reused", "results"],
    "report": ["experiment", "pipeline", "post_hoc", "evaluation", "best_model", "warnings", "notices"],
    "report_project": ["project", "base_model", "experiments"],
    "error": ["error", "code", "message", "hint", "exit_code"],
}


def _keys(data: object) -> list[str]:
    item = data[0] if isinstance(data, list) else data
    assert isinstance(item, dict), data
    return list(item)


def test_json_shapes_without_a_run(run_np, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert _keys(run_np("workspace", "init", str(root), "--json").json) == RECORD_KEYS["workspace"]
    exp = root / "sample_cpu" / "experiment_01"
    shapes = [(["projects", "ls"], "project"), (["projects", "info", "sample_cpu"], "project"),
              (["models", "ls"], "model"), (["devices", "ls"], "device"), (["experiments", "ls"], "experiment"),
              (["experiments", "info"], "experiment"), (["validate"], "validation"),
              (["run", "--dry-run"], "validation"), (["status"], "status"), (["export"], "error")]
    for args, shape in shapes:
        result = run_np(*args, "--json", cwd=exp)
        assert _keys(result.json) == RECORD_KEYS[shape], args
    assert run_np("experiments", "detail", "--json", cwd=exp).json == {"path": str(exp / "run.detail.yaml")}
    created = run_np("experiments", "create", "--steps", "go", "--json", cwd=exp.parent).json
    assert _keys(created) == RECORD_KEYS["experiment"]


@pytest.mark.np_run
def test_json_shapes_of_a_finished_run(run_np, workspace: Path) -> None:
    exp = workspace / "sample_cpu" / "experiment_02"
    assert run_np("experiments", "create", "--steps", "go", "--json", cwd=workspace / "sample_cpu").exit_code == 0
    run = run_np("run", "--json", cwd=exp)
    assert run.exit_code == 0, run.stdout + run.stderr
    assert _keys(run.json) == RECORD_KEYS["run"]
    profiled = run_np("profile", "input_model", "--json", cwd=exp)
    assert profiled.exit_code == 0 and _keys(profiled.json) == RECORD_KEYS["profile"]
    status = run_np("status", "--json", cwd=exp).json
    assert _keys(status) == RECORD_KEYS["status"]
    assert _keys(status["jobs"]) == RECORD_KEYS["status_job"]
    assert _keys(status["measurements"]) == RECORD_KEYS["status_measurement"]
    assert [m["trigger"] for m in status["measurements"]] == ["RUN_INLINE", "RUN_INLINE", "POSTHOC"]
    exported = run_np("export", "--json", cwd=exp).json
    assert _keys(exported) == RECORD_KEYS["export"] and exported["files"][0].endswith("model.pte")
    assert _keys(run_np("report", "--json", cwd=exp).json) == RECORD_KEYS["report"]
    assert _keys(run_np("report", "--json", cwd=exp.parent).json) == RECORD_KEYS["report_project"]


def test_status_and_export_records_are_public() -> None:
    import np_optimizer
    from np_optimizer.records import ExportRecord, JobState, StatusRecord

    assert np_optimizer.status is np_optimizer.api.status and np_optimizer.export is np_optimizer.api.export
    record = StatusRecord("e", "success", (JobState("00_input_model", "input_model", 0, "INPUT_MODEL", "success"),))
    assert np_optimizer.from_dict(StatusRecord, np_optimizer.to_dict(record)) == record
    export = ExportRecord("deploy", "/x", "GRAPH_QUANTIZE", "02_graph_quantize", "host", ("/x/model.pte",))
    assert np_optimizer.from_dict(ExportRecord, np_optimizer.to_dict(export)) == export
