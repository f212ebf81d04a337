"""A compiled program depends on the checkpoint and the tools only: the same W8-A8 checkpoint compiled in two
differently named folders gives the same .pte bytes on both backends, and what `np export --level deploy` hands over
names no folder of this machine (the workspace, $HOME, the virtual environment). ExecuTorch stores a delegate's compile
specs in the .pte; the Arm backend's named the compile folder (its debug artifact path) and the venv's vela.ini."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from np_optimizer.compile.cache import CompileCache
from tests.helpers import make_project


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8 * 8 * 8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


def _checkpoint(device_name: str, folder: Path) -> Path:
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.quantize.pt2e import quantize_program

    torch.manual_seed(0)
    example = (torch.randn(1, 3, 8, 8),)
    device = get_device(device_name)
    program = quantize_program(export_model(_ConvNet().eval(), example), backend=device.backend, scheme="W8-A8",
                               target=device.mlia_target, calibration=[example])
    folder.mkdir(parents=True)
    return save_program(program, folder / "model.pt2")


@pytest.mark.heavy
@pytest.mark.parametrize("device_name", ["raspberry_pi_5", "alif_e8"])
def test_one_checkpoint_compiled_in_two_folders_gives_the_same_pte(device_name: str, tmp_path: Path) -> None:
    from np_optimizer.adapters.executorch_private import deserialize_pte
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device

    device = get_device(device_name)
    program = _checkpoint(device_name, tmp_path / "checkpoint")
    ptes = []
    for folder in ("ws_one/exp/artifacts", "another_workspace_name/experiment_07/02_graph_quantize/artifacts"):
        out = tmp_path / folder / f"compiled_{device_name}"
        # a cache of its own each: the second compile lowers again instead of copying the first's bytes
        record = compile_checkpoint(program, device, out, cache=CompileCache(tmp_path / folder / "cache"))
        assert record.status == "ok" and record.num_delegates >= 1 and record.cache is not None
        assert record.cache.status == "miss"
        ptes.append((out / "model.pte").read_bytes())
    assert hashlib.sha256(ptes[0]).hexdigest() == hashlib.sha256(ptes[1]).hexdigest()
    assert ptes[0] == ptes[1]
    specs = {spec.key: bytes(spec.value).decode()
             for plan in deserialize_pte(ptes[0]).execution_plan for d in plan.delegates for spec in d.compile_specs}
    assert str(tmp_path).encode() not in ptes[0]
    if device_name == "alif_e8":  # kept: what ExecuTorch's tools parse; gone: what only the compile used
        assert {"tosa_spec", "compile_flags", "output_format", "target"} <= specs.keys()
        assert not {"debug_artifact_path", "dump_debug_info"} & specs.keys()
        assert "--config=vela.ini" in specs["compile_flags"].split(" ")


EXPORT_RUN = """version: "1.0"
steps:
- graph_quantize:
  - scheme: W8-A8
profile: [GRAPH_QUANTIZE]
"""


@pytest.mark.np_run
def test_a_deploy_export_names_no_folder_of_this_machine(tmp_path: Path, run_np,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from np_optimizer import api

    monkeypatch.setenv("NP_COMPILE_CACHE_DIR", str(tmp_path / "compiled"))  # lowered here, not copied from elsewhere
    workspace = tmp_path / "my_workspace"
    api.workspace_init(workspace)
    exp = make_project(workspace, "npu_release", device="alif_e8", steps="gq", run_yaml=EXPORT_RUN)
    assert run_np("run", cwd=exp).exit_code == 0
    result = run_np("export", "--level", "deploy", "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    files = [Path(f) for f in result.json["files"]]
    assert [f.name for f in files] == ["model.pte"]
    exported = sorted(p for p in Path(result.json["folder"]).rglob("*") if p.is_file())
    assert exported == files
    machine = {"workspace": str(workspace.resolve()), "venv": sys.prefix, "venv (resolved)": str(Path(sys.prefix).resolve())}
    if len(os.path.expanduser("~")) > 1:  # a $HOME of "/" is in every path
        machine["HOME"] = os.path.expanduser("~")
    found = {(path.name, what) for path in exported for what, text in machine.items()
             if text.encode() in path.read_bytes()}
    assert not found, f"exported files name folders of this machine: {sorted(found)}"

    # the records, configs and logs too: the run's records name the compile cache entry, the venv's vela.ini (Ethos-U)
    # and the compile folder, its log the venv's libraries; the export names them by placeholder
    machine["test folder (caches)"] = str(tmp_path.resolve())
    records = exp / "report.json", exp / "01_graph_quantize" / "job.json"
    assert any(str(tmp_path.resolve()).encode() in f.read_bytes() for f in records)  # so the check below can fail
    result = run_np("export", "--level", "result", "-o", str(tmp_path / "handover"), "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    exported = sorted(p for p in (tmp_path / "handover").rglob("*") if p.is_file())
    assert {p.name for p in exported} >= {"model.pte", "report.json", "jobs.json", "run.yaml", "execution.log"}
    found = {(path.name, what) for path in exported for what, text in machine.items()
             if text.encode() in path.read_bytes()}
    assert not found, f"exported files name folders of this machine: {sorted(found)}"
    jobs = json.loads((tmp_path / "handover" / "jobs.json").read_text())
    assert jobs[-1]["compile"]["cache"]["entry"].startswith("<np-compile-cache>/"), jobs[-1]["compile"]["cache"]
