"""The result store: job.json is the truth, report.json an index rebuilt from it under one experiment lock.

A real `np profile` is killed between its job.json and report.json writes; newer and corrupt files are handled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from tests.helpers import FinishedRun, run_np_subprocess

pytestmark = pytest.mark.np_run  # every test here reads or copies a finished np run (conftest's mlp_pi_run)

@pytest.fixture(scope="module")
def finished(mlp_pi_run: FinishedRun) -> Path:
    """One finished experiment (mlp, GO + GQ W8-A8, static estimates on raspberry_pi_5: conftest's `mlp_pi_run`,
    shared with other modules); tests only read it or copy it."""
    return mlp_pi_run.experiment


@pytest.fixture
def experiment(finished: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(finished.parents[1], target)
    return target / finished.parent.name / finished.name


def _post_hoc_ids(exp: Path) -> tuple[list[str], list[str]]:
    job = json.loads((exp / "00_input_model" / "job.json").read_text())
    report = json.loads((exp / "report.json").read_text())
    in_job = [p["measurement_id"] for p in job.get("profile", []) if p["trigger"] == "POSTHOC"]
    in_report = [p["measurement_id"] for p in report["post_hoc"] if p["job"] == "00_input_model"]
    return in_job, in_report


def test_kill_between_job_and_report_writes_leaves_them_agreeing(experiment: Path, tmp_path: Path) -> None:
    env = {"NP_CACHE_DIR": str(tmp_path / "cache")}
    killed = run_np_subprocess("profile", "INPUT_MODEL", cwd=experiment, env={**env, "NP_FAULT": "after-job-write"})
    assert killed.exit_code == -signal.SIGKILL  # died right after the job.json rename
    in_job, stale = _post_hoc_ids(experiment)
    assert len(in_job) == 1 and stale == []  # the window the crash hit: report.json was not rewritten yet
    shown = run_np_subprocess("report", "--json", cwd=experiment, env=env)
    assert shown.exit_code == 0, shown.stderr
    assert [p["measurement_ref_id"] for p in shown.json["post_hoc"]] == in_job  # every view derives from the jobs
    assert _post_hoc_ids(experiment) == (in_job, [])  # in memory: a reader writes nothing (the next writer does)
    again = run_np_subprocess("profile", "INPUT_MODEL", cwd=experiment, env=env)
    assert again.exit_code == 0, again.stderr
    in_job, in_report = _post_hoc_ids(experiment)
    assert len(in_job) == 2 and in_report == in_job


def test_job_from_a_newer_np_is_refused_and_kept(experiment: Path, tmp_path: Path) -> None:
    path = experiment / "01_graph_optimize" / "job.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    result = run_np_subprocess("report", "--json", cwd=experiment, env={"NP_CACHE_DIR": str(tmp_path / "c")})
    assert result.exit_code == 3
    assert result.json["code"] == "NP-RPT-426" and "newer np" in result.json["message"]
    assert path.read_bytes() == before  # never renamed away or rewritten


def test_corrupt_job_is_read_from_its_copy_then_set_aside_and_restored_by_a_writer(experiment: Path,
                                                                                     tmp_path: Path) -> None:
    path = experiment / "01_graph_optimize" / "job.json"
    intact = path.read_bytes()
    path.write_text("{not json")
    env = {"NP_CACHE_DIR": str(tmp_path / "c")}
    result = run_np_subprocess("report", cwd=experiment, env=env)
    assert result.exit_code == 0, result.stderr
    assert f"{path} could not be read" in result.stderr and "shown from its copy in report.json" in result.stderr
    assert path.read_text() == "{not json" and not list(path.parent.glob("job.json.corrupt-*"))  # left alone
    wrote = run_np_subprocess("profile", "INPUT_MODEL", cwd=experiment, env=env)
    assert wrote.exit_code == 0, wrote.stderr
    kept = list(path.parent.glob("job.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert path.read_bytes() == intact
    report = json.loads((experiment / "report.json").read_text())
    steps = [s["job"] for s in report["pipeline"]["steps"]]
    assert steps == ["01_graph_optimize", "02_graph_quantize"]  # never dropped from the index


def test_every_file_of_a_run_is_written_whole_with_the_users_umask(finished: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    written = [finished / "report.json", finished / "meta.json", finished / "00_input_model" / "job.json",
               finished / "00_input_model" / "artifacts" / "model.pt2",
               finished / "00_input_model" / "artifacts" / "example_inputs.pt",
               *finished.glob("*/artifacts/compiled_*/model.pte")]
    assert len(written) >= 6
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path  # not mkstemp's 0600
    assert not [p for p in finished.rglob("*.tmp")], "no temporary file is left behind"
