"""Shared fixtures: one `run_np` helper that drives the real entry point, and fresh workspaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test session gets its own estimate cache and device-queue folder, never the user's."""
    monkeypatch.setenv("NP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "np-cache"))
