"""Shared fixtures: one `run_np` helper that drives the real entry point, fresh workspaces, an estimate cache per
test (and per module for module fixtures), and copies of a module fixture's finished run for tests that change it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.cli.main import main

REPO = Path(__file__).resolve().parents[1]


@dataclass
class NpResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


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


def run_np_subprocess(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> NpResult:
    """Run np in a fresh interpreter (for import checks, concurrency and kill tests)."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    return NpResult(proc.returncode, proc.stdout, proc.stderr)


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


def make_project(workspace: Path, name: str, *, model: str = "mlp", device: str = "raspberry_pi_5",
                 steps: str = "go,gq", run_yaml: str | None = None, detail_yaml: str | None = None,
                 calibration: Path | None = None) -> Path:
    """A project with one experiment; returns the experiment folder."""
    from np_optimizer import api

    api.projects_create(name=name, model=model, device=device, cwd=workspace,
                        calibration_dataset=str(calibration) if calibration else None)
    record = api.experiments_create(steps=steps, project=name, cwd=workspace)
    exp = Path(record.path)
    if run_yaml is not None:
        (exp / "run.yaml").write_text(run_yaml)
    if detail_yaml is not None:
        (exp / "run.detail.yaml").write_text(detail_yaml)
    return exp


@pytest.fixture(scope="session", autouse=True)
def session_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled programs shared by the whole session (never the user's). Entries are content-addressed and verified,
    so a test compiling a program an earlier test compiled gets a copy of the same bytes instead of lowering again:
    the suite's speed depends on it, no result does. Tests of the cache itself set NP_COMPILE_CACHE_DIR to their own
    folder."""
    folder = tmp_path_factory.mktemp("np-compile-cache-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_COMPILE_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The estimate cache and device-queue folder of a module's own expensive fixtures (a run done once per module),
    never the user's: autouse fixtures are set up first in their scope, so before any module fixture runs np."""
    cache = tmp_path_factory.mktemp("np-cache-module")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_CACHE_DIR", str(cache))
        patch.setenv("NP_QUEUE_DIR", str(cache / "queue"))
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


def copy_workspace(experiment: Path, dest: Path, *, cache: Path | None = None) -> Path:
    """A private copy of the workspace holding `experiment` (a module fixture's finished run), for a test that
    changes it; returns the experiment in the copy. With `cache` (the fixture module's cache), $NP_CACHE_DIR's
    folder is filled with a copy of it too: the state a user has after that run, in folders of the test's own."""
    from np_optimizer.workspace import WORKSPACE_FILE

    root = next(p for p in experiment.parents if (p / WORKSPACE_FILE).is_file())
    copied = dest / root.name
    shutil.copytree(root, copied, symlinks=True)
    if cache is not None:
        shutil.copytree(cache, os.environ["NP_CACHE_DIR"], symlinks=True, dirs_exist_ok=True)
    return copied / experiment.relative_to(root)


def tree_digest(root: Path) -> dict[str, str]:
    """The sha256 of every file under `root`, by relative path. A module fixture takes it after its run and compares
    at teardown: a test that changed the shared run instead of a copy fails there, naming the files."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_unchanged(root: Path, before: dict[str, str]) -> None:
    after = tree_digest(root)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"a test changed these shared files under {root} instead of a copy (copy_workspace): {changed}"
