"""The sweep's study with the real Optuna and its journal file, told synthetic figures (no np run): the budget, no
configuration proposed twice, constraints handed to the sampler, and a study reopened after its driver died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from np_optimizer.config.sweep import validate_sweep
from np_optimizer.sweep.study import SweepStudy

BASE: dict[str, Any] = {"version": "1.0", "steps": [{"graph_quantize": [{"scheme": "W8-A8"}]}],
                        "profile": ["INPUT_MODEL", "GRAPH_QUANTIZE"]}


def _sweep(strategy: Any, constraints: list[str] | None = None) -> Any:
    sweep, issues = validate_sweep({"version": "1.0", "space": {
        "graph_optimize": [True, False], "graph_quantize.scheme": ["W8-A8", "W8-A8_dynamic", "W4-A8_dynamic"]},
        "objectives": [{"pte_size": "min"}, {"snr": "max"}], "constraints": constraints or [], "strategy": strategy})
    assert sweep is not None, issues
    return sweep


def _figures(params: dict[str, Any]) -> dict[str, float | None]:
    scheme = params["graph_quantize.scheme"]
    size = {"W8-A8": 100.0, "W8-A8_dynamic": 300.0, "W4-A8_dynamic": 250.0}[scheme] + (0 if params[
        "graph_optimize"] else 5)
    return {"PTE_SIZE": size, "SNR": {"W8-A8": 40.0, "W8-A8_dynamic": 48.0, "W4-A8_dynamic": 20.0}[scheme]}


def test_optuna_spends_its_budget_on_distinct_configurations_and_sees_the_constraints(tmp_path: Path) -> None:
    study = SweepStudy(_sweep({"optuna": {"trials": 5, "seed": 3}}, ["snr >= 30"]), BASE, tmp_path / "sweep")
    study.open()
    keys = []
    while (proposal := study.ask()) is not None:
        study.started(proposal.number, f"experiment_{proposal.number:02d}")
        keys.append(study.tried_keys())
        study.tell(proposal.number, _figures(proposal.params), None)
    counted = study.counted()
    assert len(counted) == 5
    assert len({t.user_attrs["run_key"] for t in counted}) == 5  # never the same run.yaml twice
    weak = [t for t in counted if t.params["graph_quantize.scheme"] == "W4-A8_dynamic"]
    assert all(t.user_attrs["constraints"] == [10.0] for t in weak)  # 30 - 20 dB: broken by 10, told to the sampler
    assert all(t.state == TrialState.COMPLETE for t in counted)


def test_the_grid_runs_every_distinct_point_once_and_a_reopened_study_reruns_what_was_running(tmp_path: Path) -> None:
    sweep = _sweep("grid")
    first = SweepStudy(sweep, BASE, tmp_path / "sweep")
    first.open()
    done = first.ask()
    assert done is not None
    first.started(done.number, "experiment_02")
    first.tell(done.number, _figures(done.params), None)
    running = first.ask()
    assert running is not None
    first.started(running.number, "experiment_03")
    # the driver dies here (kill -9): the journal ends with one trial RUNNING; a torn last line is cut off
    with open(first.journal, "ab") as f:
        f.write(b'{"op_code": 5, "trial_id"')
    again = SweepStudy(sweep, BASE, tmp_path / "sweep")
    again.open()
    stale = again.interrupted()
    assert [t.number for t in stale] == [running.number]
    rerun = again.rerun(stale[0])
    assert rerun.experiment == "experiment_03" and rerun.params == running.params
    again.tell(rerun.number, _figures(rerun.params), None)
    while (proposal := again.ask()) is not None:
        again.started(proposal.number, f"experiment_{proposal.number + 10}")
        again.tell(proposal.number, _figures(proposal.params), "export failed" if proposal.params[
            "graph_quantize.scheme"] == "W4-A8_dynamic" else None)
    counted = again.counted()
    assert len(counted) == len(again.grid) == 6  # the interrupted run is counted once
    assert sorted(str(t.params) for t in counted) == sorted(str(p) for p, _run in again.grid)
    failed = [t for t in counted if t.state == TrialState.FAIL]
    assert len(failed) == 2 and {t.user_attrs["reason"] for t in failed} == {"export failed"}


def test_a_configuration_left_enqueued_by_a_killed_sweep_is_not_handed_to_a_rerun(tmp_path: Path) -> None:
    """The CI failure of test_sweep_resume: the sweep was killed between enqueueing a configuration and asking for it;
    the resumed sweep's rerun of its running trial got that configuration instead (Optuna asks the oldest waiting
    trial first), and ran it in the running trial's folder beside the rerun proper."""
    sweep = _sweep("grid")
    first = SweepStudy(sweep, BASE, tmp_path / "sweep")
    first.open()
    running = first.ask()
    assert running is not None
    first.started(running.number, "experiment_02")
    left = next(p for p, _run in first.grid if p != running.params)
    first.study.enqueue_trial(left)  # the driver dies here: one trial RUNNING, one WAITING
    again = SweepStudy(sweep, BASE, tmp_path / "sweep")
    again.open()
    stale = again.interrupted()
    assert [t.number for t in stale] == [running.number]
    rerun = again.rerun(stale[0])
    assert rerun.experiment == "experiment_02" and rerun.params == running.params
    again.tell(rerun.number, _figures(rerun.params), None)
    seen = [rerun.params]
    while (proposal := again.ask()) is not None:
        assert proposal.experiment is None
        again.started(proposal.number, f"experiment_{proposal.number + 10}")
        again.tell(proposal.number, _figures(proposal.params), None)
        seen.append(proposal.params)
    assert sorted(map(str, seen)) == sorted(str(p) for p, _run in again.grid)  # each configuration once, none lost
    assert len(again.counted()) == len(again.grid)
