"""np sweep over a real Ray cluster (two nodes of one CPU each on this machine, started and stopped here): the trials
of an MLP on raspberry_pi_5 (MLIA's static figures) run as Ray tasks and give the figures the same trials give run
here, in this process, through the worker's `run` as a Ray task calls it (tests/sweep/test_sweep_vs_run.py shows the
local pool's trials give np run's figures);
a node killed mid-trial (a small CNN's trials: they last long enough to be killed in the middle) still leaves every
trial recorded once; a node with another np is refused at connect, naming
it; an address where no Ray runs is refused in seconds."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.api.trial import WORKER
from np_optimizer.config.sweep import load_sweep
from np_optimizer.errors import NetworkError
from np_optimizer.records.sweep import SweepRecord, TrialJob
from np_optimizer.sweep.driver import SweepRun, run_sweep
from np_optimizer.sweep.pool import Pool, TrialEvent
from np_optimizer.sweep.ray_pool import RayPool
from np_optimizer.workspace import Project, Workspace
from tests.helpers import make_project

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.np_run

SWEEP = """version: "1.0"
method: mlia
space:
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic]
objectives: [{pte_size: min}, {snr: max}, {macs: min}]
"""

# only the trial's last checkpoint is compiled and profiled: what the sweep compares
BASE_RUN = """version: "1.0"
steps:
- graph_optimize: null
- graph_quantize:
  - scheme: W8-A8
profile: [GRAPH_QUANTIZE]
"""

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Head and one worker node, one CPU each, with compile and step caches of their own (the trials run their steps
    and compile there for real, never reusing what this process made)."""
    node_cache = {"NP_COMPILE_CACHE_DIR": str(tmp_path_factory.mktemp("ray-node-compile-cache")),
                  "NP_STEP_CACHE_DIR": str(tmp_path_factory.mktemp("ray-node-step-cache"))}
    started = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "env_vars": node_cache})
    started.add_node(num_cpus=1, env_vars=node_cache)
    started.wait_for_nodes()
    started.np_env = node_cache  # for a node added again
    try:
        yield started
    finally:
        started.shutdown()


class _HerePool:
    """One trial at a time in this process, through the worker's `run`: the reference figures, without a warm host
    (another import of torch, ExecuTorch and MLIA) for two trials."""

    slots = 1

    def __init__(self) -> None:
        self._events: list[TrialEvent] = []

    def submit(self, job: TrialJob) -> None:
        result = WORKER.run(job, lambda text: self._events.append(TrialEvent(job.number, "progress", text)))
        self._events.append(TrialEvent(job.number, "done", result=result))

    def poll(self, timeout: float) -> list[TrialEvent]:
        events, self._events = self._events, []
        return events

    def running(self) -> int:  # a trial counts as running until the driver has polled its end
        return sum(e.kind == "done" for e in self._events)

    def close(self) -> None:
        pass


def _project(root: Path, name: str, model: str = "small_cnn") -> Project:
    Workspace.create(root)
    project = make_project(root, name, model=model, run_yaml=BASE_RUN).parent
    (project / "sweep.yaml").write_text(SWEEP)
    return Project(project)


def _sweep(project: Project, pool: Pool, on_event: Any = lambda _e: None) -> SweepRecord:
    sweep_file = project.root / "sweep.yaml"
    run = SweepRun(project, load_sweep(sweep_file), sweep_file, pool.slots, "test")
    return run_sweep(run, pool, on_event)


def _figures(project: Project, record: SweepRecord) -> dict[str, Any]:
    """Per configuration: its state, values (.pte size, MACs, SNR) and its .pte's sha256."""
    out = {}
    for trial in record.trials:
        jobs = sorted((project.root / trial.experiment).glob("0*/job.json"))
        job = json.loads(jobs[-1].read_text())
        out[json.dumps(trial.params, sort_keys=True)] = (trial.state, trial.values, job["compile"]["pte_sha256"])
    return out


def test_trials_on_the_ray_cluster_give_the_local_pools_figures(cluster: Any, tmp_path: Path) -> None:
    on_ray = _project(tmp_path / "ray_ws", "mlp_sweep", model="mlp")
    pool = RayPool(cluster.address, on_ray, WORKER)
    assert pool.slots == 2
    events: list[dict[str, Any]] = []
    record = _sweep(on_ray, pool, events.append)
    assert [t.state for t in record.trials] == ["complete"] * 2, [t.reason for t in record.trials]
    assert any(e["kind"] == "progress" and "Ray" in e["text"] for e in events)
    assert not list(on_ray.root.glob(".*")), "a staging folder was left behind"
    for trial in record.trials:  # the folder came back whole: its report, logs and programs
        folder = on_ray.root / trial.experiment
        assert (folder / "report.json").is_file() and (folder / "logs").is_dir() and list(folder.rglob("*.pte"))
        for record_file in [*folder.glob("*.json"), *folder.glob("*/job.json")]:  # no path of the node's workspace
            assert "np-sweep-ray-" not in record_file.read_text(), record_file

    local = _project(tmp_path / "local_ws", "mlp_sweep", model="mlp")
    local_record = _sweep(local, _HerePool())
    ray_figures, local_figures = _figures(on_ray, record), _figures(local, local_record)
    assert ray_figures == local_figures
    assert all(values["SNR"] and values["MACS"] and values["PTE_SIZE"] for _s, values, _h in ray_figures.values())


def test_a_node_killed_mid_trial_leaves_every_trial_recorded_once(cluster: Any, tmp_path: Path) -> None:
    project = _project(tmp_path / "ws", "cnn_sweep")
    for cache in ("NP_COMPILE_CACHE_DIR", "NP_STEP_CACHE_DIR"):  # the trials run and compile again, so they last
        shutil.rmtree(cluster.np_env[cache])  # (the nodes' caches are this module's own)
        Path(cluster.np_env[cache]).mkdir()
    pool = RayPool(cluster.address, project, WORKER)
    worker = next(iter(cluster.worker_nodes))
    killed: list[float] = []
    done_at: list[float] = []

    def kill_when_both_nodes_are_busy() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if pool.running() == 2 and ray.available_resources().get("CPU", 0) == 0:
                time.sleep(3)  # well into the trials: exported, quantizing
                cluster.remove_node(worker, allow_graceful=False)
                killed.append(time.monotonic())
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_when_both_nodes_are_busy, daemon=True)
    killer.start()
    try:
        record = _sweep(project, pool, lambda e: done_at.append(time.monotonic()) if e["kind"] == "trial_done"
                        else None)
    finally:
        killer.join(timeout=5)
        if not killed and worker in cluster.worker_nodes:
            cluster.remove_node(worker)
        cluster.add_node(num_cpus=1, env_vars=cluster.np_env)  # the cluster as the other tests expect it
        cluster.wait_for_nodes()
    assert killed, "the worker node was never seen busy"
    assert len(done_at) == 2 and min(done_at) > killed[0], "a trial ended before the kill: nothing was retried"
    assert [t.state for t in record.trials] == ["complete"] * 2, [t.reason for t in record.trials]
    trials = json.loads((project.root / "sweep" / "trials.json").read_text())["trials"]
    assert sorted(t["number"] for t in trials) == [0, 1]
    experiments = [t["experiment"] for t in trials]
    assert len(set(experiments)) == 2
    assert sorted(p.parent.name for p in project.root.glob("*/run.yaml")) == sorted(["experiment_01", *experiments])
    assert all(t["runs"] == 1 for t in trials)


def test_a_node_with_another_np_is_refused_naming_it(cluster: Any, tmp_path: Path) -> None:
    """A node whose Python finds another build of np (its files differ: here its version) is refused at connect."""
    other = tmp_path / "other_np"
    shutil.copytree(SRC / "np_optimizer", other / "np_optimizer", ignore=shutil.ignore_patterns("__pycache__"))
    versions = other / "np_optimizer" / "versions.py"
    versions.write_text(versions.read_text().replace('NP_VERSION = "', 'NP_VERSION = "9.9.9-other-'))
    node = cluster.add_node(num_cpus=1, env_vars={"PYTHONPATH": str(other)})
    cluster.wait_for_nodes()
    project = _project(tmp_path / "ws", "cnn_sweep")
    try:
        with pytest.raises(NetworkError) as caught:
            RayPool(cluster.address, project, WORKER)
    finally:
        cluster.remove_node(node)
    assert caught.value.code == "NP-SWP-503" and caught.value.exit_code == 4
    assert node.node_ip_address in caught.value.message and "9.9.9-other-" in caught.value.message
    assert "np " in caught.value.message and caught.value.hint
    assert not ray.is_initialized()


def test_an_address_where_no_ray_runs_is_refused_in_seconds(tmp_path: Path) -> None:
    project = _project(tmp_path / "ws", "cnn_sweep")
    started = time.monotonic()
    with pytest.raises(NetworkError) as caught:
        RayPool("127.0.0.1:9", project, WORKER)
    assert time.monotonic() - started < 15
    assert caught.value.code == "NP-SWP-503" and "127.0.0.1:9" in caught.value.message and caught.value.hint

