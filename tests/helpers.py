"""Shared test helpers (plain functions and types, no fixtures: those are in conftest.py, which uses these): driving np
in a fresh interpreter, making projects, copying and checking a module fixture's finished run, the MLP compiled for
the measuring tests, and waiting on other processes. Test modules import from here, never from each other."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # np's modules are imported where used: a module moved in np fails the tests that use it only
    from np_optimizer.compile.result import CompileResult
    from np_optimizer.profiler.request import MethodOutput, ProfileRequest
    from np_optimizer.workspace.remote import RemoteDevice

REPO = Path(__file__).resolve().parents[1]
# the installed ExecuTorch, as its runtime reports itself ("1.5.1+cpu" starts with "1.5.1")
ET_VERSION = __import__("importlib.metadata").metadata.version("executorch").split("+")[0]


# -- running np -------------------------------------------------------------------------------------------------------

@dataclass
class NpResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def run_np_subprocess(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> NpResult:
    """Run np in a fresh interpreter (for import checks, concurrency and kill tests)."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    return NpResult(proc.returncode, proc.stdout, proc.stderr)


# -- workspaces -------------------------------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class FinishedRun:
    """A finished experiment shared by several tests (conftest's session fixtures): never changed, only copied."""
    experiment: Path
    cache: Path  # the estimate cache ($NP_CACHE_DIR) its run filled
    proc: subprocess.CompletedProcess[str]  # the `np run` that made it: exit code, console output


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


# -- the MLP compiled for the measuring tests (on-device, device queue, SSH, locks) -----------------------------------

PROGRAM_STATS = {"macs": 82_560, "params": 83_786, "weight_bytes": 335_144}


@dataclass(frozen=True)
class MlpModels:
    program: Path  # the float .pt2
    compiled_dir: Path  # compiled for host (XNNPACK)
    compiled: CompileResult


def mlp_models(base: Path) -> MlpModels:
    """The built-in MLP exported and compiled for `host` by np's own modules; built once per test session."""
    from np_optimizer.compile.result import read_compile_record
    from np_optimizer.devices import get_device

    program, compiled_dir = base / "mlp.pt2", base / "compiled_host"
    record = read_compile_record(compiled_dir)
    if record is None or not program.is_file():
        from np_optimizer.compile import compile_checkpoint
        from np_optimizer.graph.program_io import export_model, save_program
        from np_optimizer.models.zoo import build_builtin

        model, example = build_builtin("mlp")
        save_program(export_model(model, example), program)
        record = compile_checkpoint(program, get_device("host"), compiled_dir)
    assert record.status == "ok" and record.pte_file and record.num_delegates >= 1
    return MlpModels(program, compiled_dir, record)


def request_for(models: MlpModels, work_dir: Path, options: dict[str, Any], *, device: str = "host",
                remote: RemoteDevice | None = None, notices: list[str] | None = None,
                compiled: CompileResult | None = None, compiled_dir: Path | None = None,
                program_stats: dict[str, Any] | None = None) -> ProfileRequest:
    from np_optimizer.devices import get_device
    from np_optimizer.profiler.request import ProfileRequest

    log = logging.getLogger("np.Profiler")
    return ProfileRequest(
        checkpoint="INPUT_MODEL", job="00_input_model", program_path=models.program, program_sha256="0" * 64,
        compiled=compiled or models.compiled, compiled_dir=compiled_dir or models.compiled_dir,
        device=get_device(device), options=options, work_dir=work_dir, log=log,
        remote=remote, queue_notice=notices.append if notices is not None else None,
        program_stats=dict(PROGRAM_STATS if program_stats is None else program_stats))


def raw_document(request: ProfileRequest, output: MethodOutput) -> dict[str, Any]:
    assert output.artifacts["raw"] == "measurement.json"
    return dict(json.loads((request.work_dir / output.artifacts["raw"]).read_text()))


# -- other processes --------------------------------------------------------------------------------------------------

def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.05)


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def record_of(cls: type, data: dict[str, Any]) -> Any:
    """A record from a partial dict: a required field it leaves out gets an empty value of its type ("", 0, False,
    None, (), or a record built the same way), so a test writes only the keys its rule reads."""
    import dataclasses
    import typing

    from np_optimizer.records.codec import from_dict

    def empty(hint: Any) -> Any:
        args = typing.get_args(hint)
        if type(None) in args:
            return None
        if dataclasses.is_dataclass(hint):
            return {}
        origin = typing.get_origin(hint) or hint
        return {str: "", int: 0, float: 0.0, bool: False, tuple: [], list: [], dict: {}}.get(origin, "")

    def filled(kind: Any, value: Any) -> Any:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1 and typing.get_origin(kind) in (typing.Union, __import__("types").UnionType):
            kind = args[0]
        if dataclasses.is_dataclass(kind) and isinstance(value, dict):
            hints = typing.get_type_hints(kind)
            out = {k: filled(hints[k], v) if k in hints else v for k, v in value.items()}
            for f in dataclasses.fields(kind):
                if f.init and f.name not in out and f.default is dataclasses.MISSING \
                        and f.default_factory is dataclasses.MISSING:
                    out[f.name] = filled(hints[f.name], empty(hints[f.name]))
            return out
        if typing.get_origin(kind) in (tuple, list) and isinstance(value, list):
            return [filled(typing.get_args(kind)[0], v) for v in value]
        return value

    return from_dict(cls, filled(cls, data))


def report_index(data: dict[str, Any]) -> Any:
    """report.json's index (ReportIndex) from the keys a test gives (record_of)."""
    from np_optimizer.records.index import ReportIndex

    return record_of(ReportIndex, data)


def sensitive_model_source(width: int) -> str:
    """A model file (its factory `build`) whose middle layer `cancel` needs int16 activations: it subtracts two
    halves of one large-offset output, so int8 rounding of the output loses what is left. The layer-format tests'
    model (test_sensitivity.py, test_mixed.py)."""
    return f'''
import torch
from torch import nn


class Cancel(nn.Linear):
    def forward(self, x):
        y = super().forward(x)
        half = y.shape[-1] // 2
        return y[..., :half] - y[..., half:]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.cancel, self.head = nn.Linear({width}, {width}), Cancel({width}, {2 * width}), nn.Linear({width}, 4)
        with torch.no_grad():
            self.cancel.bias.fill_(40.0)

    def forward(self, x):
        return self.head(self.cancel(self.fc1(x)))


def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, {width}),)
'''


def run_here(experiment: Path) -> None:
    """`np run` of `experiment` in this process (api.run): for a module fixture, which cannot take run_np; a fresh
    interpreter would import torch, ExecuTorch and MLIA again (about 5 CPU-seconds) for nothing the fixture checks."""
    from np_optimizer import api

    summary = api.run(experiment=str(experiment))
    log = experiment / "logs" / "execution.log"
    assert summary.status == "success", log.read_text(encoding="utf-8")[-3000:] if log.is_file() else summary
