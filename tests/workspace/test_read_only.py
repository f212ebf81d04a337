"""Reading never writes (issue 28): every read command of `np --help` leaves every file of the workspace
byte-identical, on an intact finished run and on one with damaged, stale and missing result files; a damaged job.json
or meta.json is shown from its copy in report.json and restored from it by the next writing command; a damaged job
without a copy shows as damaged, naming its file, and `np run --retry` runs it again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click
import pytest
import typer.main

from np_optimizer.cli.app import app
from tests.helpers import FinishedRun, copy_workspace, run_np_subprocess, tree_digest

# the module fixture runs np run; own_steps: its jobs' statuses are of steps that ran
pytestmark = [pytest.mark.np_run, pytest.mark.own_steps]

# Every command of `np --help`, as a read command (argv run from the experiment folder; {out} is a folder outside
# the workspace for the files a read command is asked to write) or a writing one. A new command must be put in one.
READ_COMMANDS: dict[str, list[list[str]]] = {
    "validate": [["validate"]],
    "report": [["report"], ["report", "--json"], ["report", "--plain"], ["report", "--layers", "GRAPH_QUANTIZE"],
               ["report", "-p", "mlp_pi"], ["report", "--sort", "latency"], ["report", "--html", "{out}/r.html"],
               ["report", "--check", "--budget", "latency_ms=1000", "--junit", "{out}/b.xml"]],
    "status": [["status"], ["status", "--logs", "--json"]],
    "compare": [["compare", "INPUT_MODEL", "GRAPH_QUANTIZE"], ["compare", "--json"]],
    "projects ls": [["projects", "ls"]], "projects info": [["projects", "info", "mlp_pi"]],
    "models ls": [["models", "ls"]],
    "experiments ls": [["experiments", "ls", "-p", "mlp_pi"]], "experiments info": [["experiments", "info", "experiment_01",
                                                                                "-p", "mlp_pi"]],
    "devices ls": [["devices", "ls"]], "cache ls": [["cache", "ls"]], "datasets info": [["datasets", "info", "-p", "mlp_pi"]],
    "run": [["run", "--dry-run"]], "sweep": [["sweep", "--dry-run"]],
}
WRITING_COMMANDS = {"workspace init", "projects create", "experiments create", "experiments detail", "run", "sweep",
                    "profile", "evaluate", "export", "cache prune", "datasets add"}


def _commands(command: click.Command | None, prefix: str = "") -> set[str]:
    """The commands under `command` as `np --help` lists them ("projects ls"); the root builds each when asked."""
    if not isinstance(command, click.Group):
        return {prefix.strip()}
    context = click.Context(command)
    return {name for sub in command.list_commands(context)
            for name in _commands(command.get_command(context, sub), f"{prefix}{sub} ")}


def test_every_command_is_classed_as_reading_or_writing() -> None:
    commands = _commands(typer.main.get_command(app))
    classed = READ_COMMANDS.keys() | WRITING_COMMANDS  # run and sweep are both: --dry-run only reads
    assert commands == classed, sorted(commands ^ classed)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, mlp_pi_run: FinishedRun) -> Path:
    """One finished experiment (mlp, GO + GQ W8-A8, estimates on raspberry_pi_5: a copy of conftest's `mlp_pi_run`,
    without its estimate cache) with a sweep.yaml; tests copy it."""
    exp = copy_workspace(mlp_pi_run.experiment, tmp_path_factory.mktemp("read-only"))
    (exp.parent / "sweep.yaml").write_text('version: "1.0"\nbase: experiment_01\nspace:\n'
                                           "  graph_quantize.scheme: [W8-A8, W8-A8_dynamic]\n"
                                           "objectives: [{pte_size: min}, {snr: max}]\n")
    return exp


@pytest.fixture
def ran(finished: Path, tmp_path: Path, module_cache: Path) -> Path:
    return copy_workspace(finished, tmp_path, cache=module_cache)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _stale_index(exp: Path) -> None:  # a process killed between a job.json write and report.json's
    report = json.loads((exp / "report.json").read_text())
    report["pipeline"]["steps"] = report["pipeline"]["steps"][:1]
    (exp / "report.json").write_text(json.dumps(report))


STATES: dict[str, Callable[[Path], None]] = {
    "intact": lambda _exp: None,
    "job-truncated": lambda exp: _truncate(exp / "02_graph_quantize" / "job.json"),
    "report-damaged": lambda exp: (exp / "report.json").write_bytes(b"\xff\xfe[1"),
    "stale-index": _stale_index,
    "meta-truncated": lambda exp: _truncate(exp / "meta.json"),
    "both-copies-damaged": lambda exp: (_truncate(exp / "02_graph_quantize" / "job.json"),
                                        (exp / "report.json").write_text("[]")),
}


@pytest.mark.parametrize("state", list(STATES))
def test_read_commands_leave_every_file_byte_identical(run_np, ran: Path, tmp_path: Path, state: str) -> None:
    STATES[state](ran)
    workspace = ran.parents[1]
    (tmp_path / "out").mkdir()
    before = tree_digest(workspace)
    for command, variants in READ_COMMANDS.items():
        for argv in variants:
            result = run_np(*(a.replace("{out}", str(tmp_path / "out")) for a in argv), cwd=ran)
            text = result.stdout + result.stderr
            # 6: a budget broken (the check's own outcome); with no intact copy of a job, its views are a clear error
            assert result.exit_code in ((0, 6) if state != "both-copies-damaged" else (0, 2, 3, 6)), (argv, text)
            assert "Traceback" not in text and "NP-GEN-500" not in text, (argv, text)
            after = tree_digest(workspace)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"np {' '.join(argv)} ({command}) changed {changed}"


def test_a_damaged_job_is_shown_from_report_json_then_restored_by_a_write(run_np, ran: Path) -> None:
    path = ran / "02_graph_quantize" / "job.json"
    intact = path.read_bytes()
    _truncate(path)
    damaged = path.read_bytes()
    shown = run_np("report", "--json", cwd=ran)
    assert shown.exit_code == 0, shown.stderr
    assert "GRAPH_QUANTIZE" in [s["checkpoint"] for s in shown.json["pipeline"]["steps"]]  # not dropped
    assert f"{path} could not be read" in shown.stderr and "copy in report.json" in shown.stderr
    status = run_np("status", "--json", cwd=ran)
    assert [j["status"] for j in status.json["jobs"]] == ["success"] * 3
    assert path.read_bytes() == damaged  # the readers left it (and report.json) alone
    wrote = run_np_subprocess("profile", "INPUT_MODEL", cwd=ran)  # a writing command, on another checkpoint
    assert wrote.exit_code == 0, wrote.stderr
    assert path.read_bytes() == intact  # restored, byte for byte
    kept = list(path.parent.glob("job.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == damaged
    said = wrote.stdout + wrote.stderr  # a writing command's log shows it on the console (and in its log file)
    assert kept[0].name in said and "restored from its copy in report.json" in said


def test_a_job_with_no_intact_copy_shows_as_damaged_and_a_retry_runs_it(run_np, ran: Path) -> None:
    path = ran / "02_graph_quantize" / "job.json"
    _truncate(path)
    (ran / "report.json").write_text("[]")
    status = run_np("status", cwd=ran)
    assert status.exit_code == 0, status.stderr
    assert "damaged" in status.stdout and str(path) in status.stderr and "np run --retry" in status.stderr
    retried = run_np("run", "--retry", cwd=ran)
    assert retried.exit_code == 0, retried.stdout + retried.stderr
    assert "01_graph_optimize      ✓ (reused)" in retried.stdout
    assert json.loads(path.read_text())["status"] == "success"  # ran again
    assert len(list(path.parent.glob("job.json.corrupt-*"))) == 1 and len(list(ran.glob("report.json.corrupt-*"))) == 1


def test_a_damaged_meta_json_reads_from_report_json_and_a_run_restores_it(run_np, ran: Path) -> None:
    meta = ran / "meta.json"
    before = json.loads(meta.read_text())
    _truncate(meta)
    status = run_np("status", "--json", cwd=ran)
    assert status.json["status"] == "success" and "meta.json could not be read" in status.stderr
    retried = run_np_subprocess("run", "--retry", cwd=ran)
    assert retried.exit_code == 0, retried.stderr
    restored = json.loads(meta.read_text())
    assert restored["project"] == before["project"] and restored["status"] == "success"
    assert "restored from report.json's copy" in retried.stdout + retried.stderr
