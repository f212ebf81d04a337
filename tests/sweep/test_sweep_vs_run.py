"""A sweep's trials are the experiments np run makes: the same .pte bytes, MACs, SNR and estimates as each trial's
run.yaml run by hand, and a measured latency from the same program (raspberry_pi_5, each trial measured on this
machine; alif_e8, MLIA's estimates). How close two measurements on a busy 2-core machine come is no test's business
(bench/ compares timings side by side)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from np_optimizer import api
from np_optimizer.records.sweep import SweepRecord
from np_optimizer.workspace.sweep_files import read_sweep_record
from tests.helpers import make_project, run_np_subprocess

pytestmark = pytest.mark.np_run

CPU_SWEEP = """version: "1.0"
method: mlia
measure_on: host
space:
  graph_quantize.scheme: [W8-A8, W4-A8_dynamic]
objectives: [{latency: min}, {snr: max}]
"""

NPU_SWEEP = """version: "1.0"
space:
  graph_quantize.scheme: [W8-A8, W8-A16]
objectives: [{latency: min}, {snr: max}, {macs: min}]
"""


# only the trial's last checkpoint is compiled and profiled: what the sweep compares
BASE_RUN = """version: "1.0"
steps:
- graph_optimize: null
- graph_quantize:
  - scheme: W8-A8
profile: [GRAPH_QUANTIZE]
"""


def _swept(tmp_path: Path, device: str, sweep: str, steps: str) -> tuple[Path, SweepRecord]:
    from np_optimizer.workspace import Workspace

    Workspace.create(tmp_path / "ws")
    project = make_project(tmp_path / "ws", "swept", device=device, steps=steps,
                           run_yaml=BASE_RUN if steps == "go,gq" else None).parent
    (project / "sweep.yaml").write_text(sweep)
    # two at a time even where trials measure here (a measurement may then share the CPU with a compile)
    result = run_np_subprocess("sweep", "--quiet", "--workers", "2", cwd=project)
    assert result.exit_code == 0, result.stderr
    record = read_sweep_record(project)
    assert record is not None
    return project, record


def _output_job(exp: Path) -> dict[str, Any]:
    jobs = sorted(p for p in exp.glob("0*/job.json"))
    return dict(json.loads(jobs[-1].read_text()))


def _by_hand(project: Path, experiment: str) -> Path:
    """The trial's run.yaml copied into a new experiment and run there with np run, as a user would."""
    target = project / f"by_hand_{experiment}"
    target.mkdir()
    shutil.copy(project / experiment / "run.yaml", target / "run.yaml")
    summary = api.run(experiment=str(target))
    assert summary.status == "success", summary.error
    return target


def _figures(exp: Path) -> dict[str, Any]:
    job = _output_job(exp)
    report = api.report(experiment=str(exp))
    assert report.experiment is not None
    row = report.experiment.rows[-1]
    return {"pte_sha256": job["compile"]["pte_sha256"], "pte_bytes": job["compile"]["pte_bytes"],
            "macs": row.value("MACS"), "snr": row.value("SNR"),
            "latency": row.value("LATENCY"), "npu_cycles": row.value("NPU_CYCLES")}


def _measured(exp: Path) -> dict[str, Any]:
    """The experiment's last successful measured round on this machine."""
    data = json.loads((exp / "report.json").read_text())
    return dict([r for r in data["post_hoc"] if r["device"] == "host" and r["status"] == "SUCCESS"][-1])


def test_two_trials_on_raspberry_pi_5_measured_here_match_np_run_one_by_one(tmp_path: Path) -> None:
    project, record = _swept(tmp_path, "raspberry_pi_5", CPU_SWEEP, "go,gq")
    assert [t.state for t in record.trials] == ["complete"] * 2
    assert record.measure_on == "host"
    for trial in record.trials:
        by_hand = _by_hand(project, trial.experiment)
        swept = _figures(project / trial.experiment)
        assert _figures(by_hand) | {"latency": None} == swept | {"latency": None}, trial.params
        assert trial.values["SNR"] == pytest.approx(swept["snr"])
        measured = _measured(project / trial.experiment)  # the sweep's latency is the round it measured
        latency = measured["extras"]["latency_ms"]
        assert 0 < latency["min"] <= float(trial.values["LATENCY"] or 0) <= latency["max"], trial.params
    trial = record.trials[0]  # measured by hand too: the same program, the same kind of round
    by_hand = project / f"by_hand_{trial.experiment}"
    api.profile(["OUTPUT_MODEL"], experiment=str(by_hand), device="host", method="on-device")
    swept_round, hand_round = _measured(project / trial.experiment), _measured(by_hand)
    assert swept_round["method"] == hand_round["method"]
    assert swept_round["extras"]["latency_ms"]["n"] == hand_round["extras"]["latency_ms"]["n"] > 0


def test_a_sweep_on_alif_e8_gives_np_runs_estimates(tmp_path: Path) -> None:
    """Byte for byte the same .pte as np run of the trial's run.yaml in another folder (the .pte keeps no compile
    folder nor vela.ini location: backends/ethos_u.program_spec), and the same estimates, MACs and SNR."""
    project, record = _swept(tmp_path, "alif_e8", NPU_SWEEP, "gq")
    assert [t.state for t in record.trials] == ["complete"] * 2
    for trial in record.trials:
        swept = _figures(project / trial.experiment)
        assert _figures(_by_hand(project, trial.experiment)) == swept
        assert trial.values["LATENCY"] == pytest.approx(swept["latency"])
        assert trial.values["MACS"] == pytest.approx(swept["macs"])
