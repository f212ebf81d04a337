"""Shared fixtures (fixtures only: the helpers they and the tests use are in tests/helpers.py): `run_np`, which drives
the real entry point in-process, fresh workspaces, an estimate cache per test (and per module for module fixtures),
the MLP compiled for the measuring tests, and the MLP's default np run that several modules read or copy."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from np_optimizer.cli.main import main
from np_optimizer.processes import YOUNG_COLLECTION_EVERY
from tests.helpers import (
    FinishedRun,
    MlpModels,
    NpResult,
    assert_unchanged,
    make_project,
    mlp_models,
    tree_digest,
)

# Young-generation garbage collections every YOUNG_COLLECTION_EVERY allocations instead of Python's 700, in each whole
# test process, as np run and np profile do for their own duration (processes.fewer_collections): the tests also lower,
# quantize and export outside them, and torch.export's and ExecuTorch's passes allocate millions of short-lived
# objects (an XNNPACK lowering of sample_cpu's GQ: 4.9 CPU-s against 5.4 to 6.0). Only when collections happen changes.
gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])

# The longest test files, first (each file's seconds in a fresh clone's make test, 2026-12-07): scripts/test.sh passes
# --no-loadscope-reorder, so xdist hands the files to its two workers in this order (by default it sorts them by their
# number of tests), and no long file is left to run alone on one core at the end.
_LONGEST_FIRST = ("test_zoo.py", "test_ray_pool.py", "test_architectures.py", "test_rewrites.py",
                  "test_advanced_quantize.py", "test_pipeline.py", "test_sweep_cli.py", "test_layer_formats.py",
                  "test_sensitivity.py", "test_sweep_vs_run.py", "test_sweep_resume.py", "test_profiler.py",
                  "test_report_html.py", "test_npu_partitions.py", "test_farm.py", "test_step_cache.py",
                  "test_layers.py", "test_on_device.py", "test_measured_profiling.py", "test_hostile_inputs.py",
                  "test_embedding.py", "test_compile_cache.py", "test_host_times.py", "test_registries.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order within a file is kept


@pytest.fixture
def run_np(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run `np ARGS` in-process from `cwd`; returns exit code and captured output."""

    def _run(*args: str, cwd: Path | None = None) -> NpResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return NpResult(code, captured.out, captured.err)

    return _run


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh workspace with the sample projects."""
    from np_optimizer import api

    api.workspace_init(tmp_path / "ws")
    return tmp_path / "ws"


@pytest.fixture
def cpu_experiment(workspace: Path) -> Path:
    return workspace / "sample_cpu" / "experiment_01"


@pytest.fixture
def npu_experiment(workspace: Path) -> Path:
    return workspace / "sample_npu" / "experiment_01"


@pytest.fixture(scope="session", autouse=True)
def session_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled programs shared by the whole session (never the user's). Entries are content-addressed and verified,
    so a test compiling a program an earlier test compiled gets a copy of the same bytes instead of lowering again:
    the suite's speed depends on it, no result does. Tests of the cache itself set NP_COMPILE_CACHE_DIR to their own
    folder."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one cache for every worker of the run (it takes concurrent writers)
        base = base.parent
    folder = base / "np-compile-cache-session"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_COMPILE_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def session_step_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The step cache shared by the whole session, as the compile cache is: many tests run the same small np run, and
    from the second on its jobs are copies of the first's (the same bytes, pipeline/step_cache.py). A test or module
    that must see its steps run is marked `own_steps` and gets an empty one of its own (_own_step_cache)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one cache for every worker of the run (it takes concurrent writers)
        base = base.parent
    folder = base / "np-step-cache-session"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_STEP_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The estimate cache and device-queue folder of a module's own expensive fixtures (a run done once per module),
    never the user's: autouse fixtures are set up first in their scope, so before any module fixture runs np. A module
    marked `own_steps` gets its own step cache here too."""
    cache = tmp_path_factory.mktemp("np-cache-module")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_CACHE_DIR", str(cache))
        patch.setenv("NP_QUEUE_DIR", str(cache / "queue"))
        if request.node.get_closest_marker("own_steps"):
            patch.setenv("NP_STEP_CACHE_DIR", str(cache / "steps"))
        yield cache


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own estimate cache and device-queue folder, never the user's nor another test's. The queue
    is $NP_CACHE_DIR/queue, or $NP_QUEUE_DIR where np reads that. A test of sharing across commands uses this cache for
    all of them, or sets NP_CACHE_DIR itself."""
    cache = tmp_path / "np-cache"
    monkeypatch.setenv("NP_CACHE_DIR", str(cache))
    monkeypatch.setenv("NP_QUEUE_DIR", str(cache / "queue"))
    return cache


@pytest.fixture(autouse=True)
def _own_step_cache(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty step cache of the test's own for a test (or module) marked `own_steps`."""
    if request.node.get_closest_marker("own_steps"):
        monkeypatch.setenv("NP_STEP_CACHE_DIR", str(tmp_path / "np-steps"))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlpModels]:
    """The MLP compiled for host (helpers.mlp_models), built once per worker and read by the measuring tests of every
    module that asks for it; it checks at teardown that no test changed it."""
    shared = mlp_models(tmp_path_factory.getbasetemp() / "np-measure-models")
    before = tree_digest(shared.program.parent)
    yield shared
    assert_unchanged(shared.program.parent, before)


@pytest.fixture(scope="session")
def mlp_pi_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedRun]:
    """One `np run` of the MLP on raspberry_pi_5 with the default run.yaml (GO + GQ W8-A8, the three checkpoints
    estimated by MLIA), in a subprocess like a user's, with an estimate cache of its own. Built once per worker for
    every module that needs this finished experiment (test_pipeline, test_profiler, test_report, test_read_only,
    test_store): tests only read it, and a test or module fixture that changes it takes a copy
    (helpers.copy_workspace, with `cache` where it wants the run's estimates). Teardown checks that nobody changed
    it."""
    from np_optimizer import api

    base = tmp_path_factory.mktemp("mlp-pi-run")
    root, cache = base / "ws", base / "np-cache"
    api.workspace_init(root)
    exp = make_project(root, "mlp_pi")
    env = {**os.environ, "NP_CACHE_DIR": str(cache), "NP_QUEUE_DIR": str(cache / "queue"),
           "NP_STEP_CACHE_DIR": str(cache / "steps")}  # its own: test_pipeline reads how its steps ran
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", "run"], cwd=exp, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    before = tree_digest(root)
    yield FinishedRun(exp, cache, proc)
    assert_unchanged(root, before)
