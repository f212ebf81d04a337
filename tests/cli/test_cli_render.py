"""User text is printed as written: never read as rich markup, in errors, hints, warnings and table cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_CONFIG, EXIT_USAGE
from tests.helpers import make_project


def test_closing_tag_in_a_filter_is_a_clear_error(run_np, tmp_path: Path) -> None:
    result = run_np("devices", "ls", "--filter", "[/x]", cwd=tmp_path)
    assert result.exit_code == EXIT_USAGE
    assert "Traceback" not in result.stderr and "MarkupError" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["Error [NP-DEV-410] Invalid --filter '[/x]'.",
                     "Hint: Use key=value, e.g. --filter backend=xnnpack."]
    assert result.stdout == ""


@pytest.mark.parametrize("args", [["devices", "ls", "--filter", "[batch]"], ["report", "-e", "[batch]"],
                                  ["report", "-e", "[/bold]"], ["validate", "-e", ":warning: [bold]x"]])
def test_brackets_in_messages_are_kept(run_np, workspace: Path, args: list[str]) -> None:
    result = run_np(*args, cwd=workspace / "sample_cpu")
    assert result.exit_code in (EXIT_USAGE, EXIT_CONFIG)
    assert "Traceback" not in result.stderr
    assert args[-1] in result.stderr  # as typed: no tag removed, no emoji substituted


def test_brackets_in_report_cells_and_warnings_are_kept(run_np, workspace: Path) -> None:
    from np_optimizer.records import JobRecord, MetricValue, ProfileResult
    from np_optimizer.workspace import resolve_experiment, utc_now
    from np_optimizer.workspace.store import ExperimentStore

    exp = make_project(workspace, "brackets")
    store = ExperimentStore(resolve_experiment(str(exp), None, workspace))
    store.start_run(project="brackets", device="raspberry_pi_5", runtime="executorch", backend="xnnpack")
    store.start_profiling(["INPUT_MODEL"], method="mlia")
    result = ProfileResult(
        measurement_id="m1", checkpoint="INPUT_MODEL", job="00_input_model", checkpoint_sha256="", device="raspberry_pi_5",
        runtime="executorch", backend="xnnpack", method="mlia", result_kind="estimated", trigger="RUN_INLINE",
        status="SUCCESS", started_at=utc_now(), metrics=(MetricValue("MACS", 1000.0, "MACs"),),
        warnings=("[batch] dimension [/x] was ignored",))
    job = JobRecord(name="00_input_model", step_type="input_model", step_index=0, checkpoint="INPUT_MODEL",
                    status="[red]queued[/red]", created_at="2026-01-01T00:00:00")
    store.write_job(job)
    store.add_profile_round(result)  # a round of the Profiling phase begun above
    shown = run_np("report", cwd=exp)
    assert shown.exit_code == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if "input_model" in line)
    assert "[red]queued[/red]" in row  # a table cell, as written
    assert "input_model: [batch] dimension [/x] was ignored" in shown.stderr  # a warning, as written
