"""The store's verbs on a report.json written by an older np (data/report_np_0b05a2b.json: np run with a profile and an
evaluation, then a post-hoc np profile, before the index was a record): it reads back key for key, reading writes
nothing, and each verb changes only its own part. No np run: the job files are the report's own copies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.records import ProfileResult, from_dict
from np_optimizer.workspace.layout import Experiment
from np_optimizer.workspace.store import ExperimentStore

OLDER = Path(__file__).parent / "data" / "report_np_0b05a2b.json"


@pytest.fixture
def store(tmp_path: Path) -> ExperimentStore:
    """An experiment folder with the older report.json and the job.json files it indexes (no meta.json)."""
    root = tmp_path / "experiment_01"
    root.mkdir()
    (root / "report.json").write_bytes(OLDER.read_bytes())
    for name, record in json.loads(OLDER.read_text())["job_records"].items():
        (root / name).mkdir()
        (root / name / "job.json").write_text(json.dumps(record, indent=2))
    return ExperimentStore(Experiment(root))


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()}


def _stored(store: ExperimentStore) -> dict[str, Any]:
    return dict(json.loads(store.experiment.report_file.read_text()))


def test_an_older_report_reads_key_for_key_and_reading_writes_nothing(store: ExperimentStore) -> None:
    before = _digests(store.experiment.root)
    older = json.loads(OLDER.read_text())
    assert json.dumps(store.read_report()) == json.dumps(older)  # the same keys, in the same order, the same values
    index = store.read_index()
    assert index.profile.listed == ("INPUT_MODEL", "GRAPH_OPTIMIZE") and len(index.post_hoc) == 2
    assert store.read_meta() == {}
    assert _digests(store.experiment.root) == before


def test_each_verb_changes_its_own_part_only(store: ExperimentStore) -> None:
    older = json.loads(OLDER.read_text())
    store.end_run("interrupted")
    ended = _stored(store)
    ended_at = ended["experiment"]["ended_at"]
    assert ended["experiment"] == {**older["experiment"], "status": "interrupted", "ended_at": ended_at}
    ended.pop("experiment")
    assert ended == {k: v for k, v in older.items() if k != "experiment"}  # nothing else changed
    meta = json.loads(store.experiment.meta_file.read_text())
    assert meta["status"] == "interrupted" and meta["pid"] is None and meta["ended_at"] == ended_at

    store.disable_profiling()
    assert _stored(store)["profile"] == {"enabled": False, "listed": [], "results": []}  # the older spelling
    store.start_profiling(["INPUT_MODEL"], method="mlia")
    profile = _stored(store)["profile"]
    assert list(profile) == ["enabled", "listed", "method", "started_at", "results"]
    assert profile["results"] == []  # the rounds so far are of earlier runs
    assert _stored(store)["post_hoc"] == older["post_hoc"]

    orphan = from_dict(ProfileResult, {**older["post_hoc"][0], "job": "05_gone", "measurement_id": "orphan",
                                       "started_at": "2099-01-01T00:00:00"})
    store.add_profile_round(orphan)  # no job.json for it: the index keeps it
    assert [r["measurement_id"] for r in _stored(store)["post_hoc"]][-1] == "orphan"
    inline = from_dict(ProfileResult, {**older["profile"]["results"][0], "measurement_id": "now",
                                       "started_at": "2099-01-01T00:00:00"})
    store.add_profile_round(inline)  # into its job's job.json, and the run's result
    job = json.loads(store.job_file(inline.job).read_text())
    assert job["profile"][-1]["measurement_id"] == "now"
    assert [r["measurement_id"] for r in _stored(store)["profile"]["results"]] == ["now"]
    assert _stored(store) == store.read_report()  # what the writer wrote is what readers build


def test_create_experiment_writes_a_new_meta_once(tmp_path: Path) -> None:
    store = ExperimentStore(Experiment(tmp_path / "experiment_02"))
    store.create_experiment(project="p", device="raspberry_pi_5", sweep_trial=3)
    meta = json.loads(store.experiment.meta_file.read_text())
    assert list(meta) == ["schema_version", "name", "project", "device", "status", "created_at", "updated_at",
                          "sweep_trial"]
    assert meta["status"] == "created" and meta["name"] == "experiment_02" and meta["sweep_trial"] == 3
    store.create_experiment(project="other", device="host")  # a resumed sweep writes its trial's folder again
    assert json.loads(store.experiment.meta_file.read_text()) == meta
    assert not store.experiment.report_file.exists()  # report.json is written by the first run
