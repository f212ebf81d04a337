"""A sweep trial's report, the TrialResult: it survives the worker's JSON line unchanged (figures with their units,
the reason of a missing value, the error), a real worker process that cannot run its trial answers with a failed
result naming why, and a process that ends without answering is a failed trial, never a lost one."""

from __future__ import annotations

import json
from pathlib import Path

from np_optimizer.api.trial import WORKER
from np_optimizer.records.codec import from_dict, to_dict
from np_optimizer.records.sweep import TrialError, TrialFigure, TrialJob, TrialResult
from np_optimizer.sweep.worker import Worker, job_line, job_of, read_events, result_line, start

RESULT = TrialResult(
    "experiment_07", "success", duration_s=12.5, checkpoint="GRAPH_QUANTIZE",
    figures=(TrialFigure("PTE_SIZE", 81234.0, "B"), TrialFigure("SNR", None, "dB", "the outputs are identical to "
                                                                                   "INPUT_MODEL's (no finite SNR)")),
    caveats=("latency covers the NPU part only",), notes=("no measured round of graph_quantize on host",),
    node="10.0.0.5")


def test_a_trial_result_round_trips_through_its_json_line() -> None:
    line = result_line(RESULT)
    assert line.endswith("\n") and "\n" not in line[:-1]  # one line
    event = json.loads(line)
    assert event["event"] == "done"
    back = from_dict(TrialResult, event["result"])
    assert back == RESULT
    assert back.values == {"PTE_SIZE": 81234.0, "SNR": None}
    assert [f.missing for f in back.figures] == [None, "snr: the outputs are identical to INPUT_MODEL's (no finite "
                                                       "SNR)"]
    failed = TrialResult("experiment_08", "failed", error=TrialError("run.yaml: W8-A16 is not supported", "Use W8-A8",
                                                                     "NP-CFG-422"))
    assert from_dict(TrialResult, json.loads(json.dumps(to_dict(failed)))) == failed


def test_a_trial_job_round_trips_as_the_workers_argument(tmp_path: Path) -> None:
    job = TrialJob(3, tmp_path / "experiment_04", "mlia", retry=True, measure_on="host", metrics=("LATENCY", "SNR"),
                   measure_only=True)
    assert job_of(job_line(job)) == job


def test_a_worker_that_cannot_run_its_trial_answers_with_the_reason(tmp_path: Path) -> None:
    """The real worker process on a folder that is no experiment: a failed result with np's error, as one line."""
    job = TrialJob(0, tmp_path / "ws" / "proj" / "experiment_02", metrics=("PTE_SIZE",))
    progress: list[str] = []
    result = read_events(job, start(WORKER, job), progress.append)
    assert result.status == "failed" and result.experiment == "experiment_02" and result.figures == ()
    assert result.error is not None and result.error.code and result.error.code.startswith("NP-")
    assert result.error.message and result.duration_s is not None


def test_a_worker_that_ends_without_a_result_fails_the_trial(tmp_path: Path) -> None:
    """A child that prints no result line (here: a module that is no worker, exiting 1) is a failed trial."""
    job = TrialJob(1, tmp_path / "experiment_03")
    result = read_events(job, start(Worker("json.tool", WORKER.run), job), lambda _t: None)
    assert result.status == "failed" and result.experiment == "experiment_03"
    assert result.error is not None and "ended without a result (exit code" in result.error.message
