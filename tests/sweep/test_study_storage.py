"""The sweep's study in a database (--storage URL), through Optuna's public API only: np keeps the RDBStorage it made
(Optuna wraps it in a cache that writes through) and asks it for the study's id. A study reopened after its driver
died reruns what was running, two projects share one database, and a URL that is not one is a one-line NP-CFG-400."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState

from np_optimizer.errors import ConfigError
from np_optimizer.sweep.study import SweepStudy
from tests.sweep.test_study import BASE, _figures, _sweep


def test_a_database_study_is_reopened_and_its_running_trial_rerun(tmp_path: Path) -> None:
    url, sweep = f"sqlite:///{tmp_path / 'study.db'}", _sweep("grid")
    first = SweepStudy(sweep, BASE, tmp_path / "a" / "sweep", storage=url, name="project_a")
    first.open()
    other = SweepStudy(sweep, BASE, tmp_path / "b" / "sweep", storage=url, name="project_b")  # the same database
    other.open()
    done = first.ask()
    assert done is not None
    first.started(done.number, "experiment_02")
    first.tell(done.number, _figures(done.params), None)
    running = first.ask()
    assert running is not None
    first.started(running.number, "experiment_03")
    waiting = first.study.enqueue_trial({"graph_optimize": True, "graph_quantize.scheme": "W8-A8_dynamic"})
    assert waiting is None and other.study.trials == []  # (project_b's study holds none of project_a's trials)

    again = SweepStudy(sweep, BASE, tmp_path / "a" / "sweep", storage=url, name="project_a")
    again.open()  # the driver died: one trial RUNNING, one WAITING in Optuna's queue
    stale = again.interrupted()  # the WAITING one is closed (FAIL, set on the storage np made), the RUNNING returned
    assert [t.number for t in stale] == [running.number]
    closed = [t for t in again.study.get_trials() if t.user_attrs.get("interrupted")]
    assert [t.state for t in closed] == [TrialState.FAIL]
    rerun = again.rerun(stale[0])
    assert rerun.experiment == "experiment_03" and rerun.params == running.params
    again.tell(rerun.number, _figures(rerun.params), None)
    states = {t.number: t.state for t in again.study.get_trials()}
    assert states[running.number] == TrialState.FAIL and states[rerun.number] == TrialState.COMPLETE
    assert len(again.counted()) == 2  # the done one and the rerun; interrupted ones are not counted


@pytest.mark.parametrize("url", ["not a url", "redis://localhost/0"])
def test_a_storage_that_is_not_a_database_url_is_one_line(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        SweepStudy(_sweep("grid"), BASE, tmp_path / "sweep", storage=url).open()
    assert refused.value.code == "NP-CFG-400" and refused.value.message.startswith(f"--storage {url}: the study")
