"""--model DIR/file.py:factory copies the file's folder (its modules, subpackages and small data files) into the
project; --model package.module:factory imports an installed module and records its distribution; the factory is
called once at `np projects create`, in a process of its own with a time limit. Real files, real processes."""

from __future__ import annotations

import json
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import pytest

from np_optimizer.errors import EXIT_CONFIG, ModelError
from np_optimizer.processes import pid_alive
from tests.helpers import wait_for

pytestmark = pytest.mark.own_steps  # a package model's steps must run in the project's own process state

NET = '''\
import torch
from helper_blocks import Block
from settings.sizes import WIDTH
from pathlib import Path

SCALE = float((Path(__file__).parent / "scale.txt").read_text())


def build():
    return torch.nn.Sequential(Block(WIDTH, SCALE), torch.nn.ReLU()), (torch.randn(1, WIDTH),)
'''
BLOCKS = '''\
import torch


class Block(torch.nn.Linear):
    def __init__(self, width, scale):
        super().__init__(width, width)
        self.scale = scale

    def forward(self, x):
        return super().forward(x) * self.scale
'''


def _package(folder: Path, width: int) -> Path:
    """net.py importing helper_blocks.py and settings/sizes.py, reading scale.txt; plus what must not be copied."""
    (folder / "settings").mkdir(parents=True)
    (folder / "net.py").write_text(NET)
    (folder / "helper_blocks.py").write_text(BLOCKS)
    (folder / "settings" / "__init__.py").write_text("")
    (folder / "settings" / "sizes.py").write_text(f"WIDTH = {width}\n")
    (folder / "scale.txt").write_text("0.5\n")
    for skipped in (".git/objects", "__pycache__", "env", "venv", "data/raw"):
        (folder / skipped).mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "__pycache__" / "net.cpython-311.pyc").write_bytes(b"\0")
    (folder / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / "venv" / "lib.py").write_text("")
    (folder / "data" / "raw" / "big.bin").write_bytes(b"\1" * 1000)
    (folder / ".npignore").write_text("# not the model's\ndata/raw/\n")
    return folder / "net.py"


def _load(project: Path):
    from np_optimizer.models.source import ModelSpec, load_model
    from np_optimizer.records import from_dict

    spec = from_dict(ModelSpec, json.loads((project / "project.json").read_text())["model"])
    return spec, load_model(spec, project)


def test_package_is_copied_loads_and_exports_beside_another(run_np, workspace: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from np_optimizer import api
    from np_optimizer.graph.program_io import export_model

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # loading leaves the project's copy as it was copied

    entry = _package(tmp_path / "src" / "one", width=8)
    result = run_np("projects", "create", "--name", "pkg_one", "--model", f"{entry}:build", "--device", "host",
                    "--json", cwd=workspace)
    assert result.exit_code == 0, result.stdout + result.stderr
    model = result.json["model"]
    assert (model["kind"], model["file"], model["package"], model["module"]) == \
        ("package", "model/package/net.py", "model/package", "net")
    copied = workspace / "pkg_one" / "model" / "package"
    assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()) == \
        [".npignore", "helper_blocks.py", "net.py", "scale.txt", "settings/__init__.py", "settings/sizes.py"]
    api.projects_create(name="pkg_two", model=f"{_package(tmp_path / 'src' / 'two', width=3)}:build", device="host",
                        cwd=workspace)
    import shutil

    shutil.rmtree(tmp_path / "src")  # the projects no longer need the source
    path_before = list(sys.path)
    other = types.ModuleType("settings")  # a module of the same name from elsewhere: put back after each load
    monkeypatch.setitem(sys.modules, "settings", other)
    for name, width in (("pkg_one", 8), ("pkg_two", 3), ("pkg_one", 8)):  # same module names, each its own code
        _spec, loaded = _load(workspace / name)
        assert tuple(loaded.example_inputs[0].shape) == (1, width)
        program = export_model(loaded.module, loaded.example_inputs)
        assert program.module()(*loaded.example_inputs).shape == (1, width)
    assert sys.path == path_before and not sys.dont_write_bytecode
    assert not list((workspace / "pkg_one").rglob("__pycache__"))
    assert not {"net", "helper_blocks", "settings.sizes"} & set(sys.modules) and sys.modules["settings"] is other
    # np run's error names the line in the project's copy, and how to see the whole traceback
    blocks = workspace / "pkg_two" / "model" / "package" / "helper_blocks.py"
    blocks.write_text(BLOCKS.replace("        self.scale = scale\n", "        self.scale = 1 / (scale - scale)\n"))
    with pytest.raises(ModelError) as failed:
        _load(workspace / "pkg_two")
    assert failed.value.message.startswith(f"{blocks}:7: ZeroDivisionError: float division by zero (from build() in ")
    assert f"cd {blocks.parent} && python -c 'import net; net.build()'" in str(failed.value.hint)
    assert "own copy of the code" in str(failed.value.hint)


@pytest.mark.np_run
def test_np_run_imports_the_packages_modules(run_np, workspace: Path, tmp_path: Path) -> None:
    """The issue's case: net.py does `from helper_blocks import Block`; np run used to fail with ModuleNotFoundError."""
    from tests.helpers import make_project

    entry = _package(tmp_path / "src", width=8)
    exp = make_project(workspace, "packaged", model=f"{entry}:build", device="host", steps="go",
                       run_yaml='version: "1.0"\nsteps:\n- graph_optimize: null\n')
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    job = json.loads((exp / "00_input_model" / "job.json").read_text())
    assert job["status"] == "success" and job["parameters"]["example_inputs"] == ["float32[1, 8]"]


def test_a_package_with_relative_imports_is_copied_whole(tmp_path: Path) -> None:
    """A file inside a Python package: the outermost package is copied under its name, imported as pkg.sub.net."""
    from np_optimizer.models.factory import load_factory
    from np_optimizer.models.package import copy_package, package_layout
    from np_optimizer.records.commands import ModelSpec

    sub = tmp_path / "repo" / "pkg" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "repo" / "pkg" / "blocks.py").write_text(BLOCKS)
    (sub / "__init__.py").write_text("")
    (sub / "net.py").write_text("import torch\nfrom ..blocks import Block\n\n\ndef build():\n"
                                "    return Block(4, 2.0), (torch.ones(1, 4),)\n")
    layout = package_layout(sub / "net.py")
    assert (layout.target, layout.module) == ("model/package/pkg", "pkg.sub.net")
    project = tmp_path / "project"
    copy_package(layout, project)
    spec = ModelSpec("package", name="net", file="model/package/pkg/sub/net.py", factory="build",
                     package="model/package", module=layout.module)
    model, inputs = load_factory(spec, project)
    assert model(*inputs).shape == (1, 4) and "pkg" not in sys.modules


def test_installed_module_records_its_distribution(run_np, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    from np_optimizer.graph.program_io import export_model

    result = run_np("projects", "create", "--name", "lstm", "--model", "executorch.examples.models.lstm:LSTMModel",
                    "--device", "host", "--json", cwd=workspace)
    assert result.exit_code == 0, result.stdout + result.stderr
    model = result.json["model"]
    assert (model["kind"], model["module"], model["factory"], model["distribution"], model["version"]) == \
        ("module", "executorch.examples.models.lstm", "LSTMModel", "executorch", metadata.version("executorch"))
    _spec, loaded = _load(workspace / "lstm")
    # get_example_inputs() nests (input, (h0, c0)): the model takes them flat
    assert [tuple(t.shape) for t in loaded.example_inputs] == [(5, 3, 10), (2, 3, 20), (2, 3, 20)]
    assert len(export_model(loaded.module, loaded.example_inputs).graph_signature.user_inputs) == 3
    info = json.loads((workspace / "lstm" / "project.json").read_text())
    info["model"]["version"] = "0.0.1"
    (workspace / "lstm" / "project.json").write_text(json.dumps(info))
    with caplog.at_level("WARNING", logger="np.Models"):
        _load(workspace / "lstm")
    warned = [r.getMessage() for r in caplog.records if r.name == "np.Models"]
    assert len(warned) == 1 and f"executorch 0.0.1, but {metadata.version('executorch')} is installed" in warned[0]
    missing = run_np("projects", "create", "--name", "nomod", "--model", "np_no_such_package.models:build",
                     "--device", "host", "--json", cwd=workspace)
    assert missing.exit_code == EXIT_CONFIG and missing.json["code"] == "NP-MDL-404"
    assert "No module np_no_such_package" in missing.json["message"] and not (workspace / "nomod").exists()


@pytest.mark.parametrize(("helper", "line", "last", "code"), [
    ("def explode():\n    return [1][2]\n", 2, "IndexError: list index out of range", "NP-MDL-422"),
    ("def explode(:\n    pass\n", 1, "SyntaxError: invalid syntax", "NP-MDL-422"),
    ("import np_missing_dependency\n", 1, "ModuleNotFoundError: No module named 'np_missing_dependency'",
     "NP-MDL-501"),
], ids=["raises", "syntax_error", "missing_dependency"])
def test_a_failing_factory_fails_the_create(run_np, workspace: Path, tmp_path: Path, helper: str, line: int,
                                             last: str, code: str) -> None:
    source = tmp_path / "failing"
    source.mkdir()
    (source / "net.py").write_text("def build():\n    from helper_blocks import explode\n    return explode()\n")
    (source / "helper_blocks.py").write_text(helper)
    result = run_np("projects", "create", "--name", "failing", "--model", f"{source / 'net.py'}:build", "--device",
                    "host", "--json", cwd=workspace)
    assert result.exit_code == EXIT_CONFIG and result.json["code"] == code
    assert result.json["message"] == f"{source / 'helper_blocks.py'}:{line}: {last} (from build() in " \
                                     f"{source / 'net.py'})"
    assert f"cd {source} && python -c 'import net; net.build()'" in result.json["hint"]
    assert not (workspace / "failing").exists()


HANGS = '''\
import subprocess, sys, time
from pathlib import Path

def build():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    Path({pidfile!r}).write_text(str(child.pid))
    {end}
'''


def test_a_hanging_factory_is_stopped_and_leaves_nothing_running(run_np, workspace: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "slow"
    source.mkdir()
    pidfile = tmp_path / "child.pid"
    (source / "net.py").write_text(HANGS.format(end="time.sleep(300)", pidfile=str(pidfile)))
    monkeypatch.setenv("NP_FACTORY_TIMEOUT", "2")
    result = run_np("projects", "create", "--name", "slow", "--model", f"{source / 'net.py'}:build", "--device",
                    "host", "--json", cwd=workspace)
    assert result.exit_code == EXIT_CONFIG and result.json["code"] == "NP-MDL-504"
    assert result.json["message"] == f"build() in {source / 'net.py'} did not return within 2 s; np stopped it."
    assert "NP_FACTORY_TIMEOUT" in result.json["hint"] and not (workspace / "slow").exists()
    # the factory's own child was in the process's session: gone with it
    pid = int(pidfile.read_text())
    wait_for(lambda: not pid_alive(pid), 5, "the factory's child to end")
    # a factory that returns: nothing it started is left running either
    monkeypatch.delenv("NP_FACTORY_TIMEOUT")
    returns = "import torch\n    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)"
    (source / "net.py").write_text(HANGS.format(end=returns, pidfile=str(pidfile)))
    assert run_np("projects", "create", "--name", "quick", "--model", f"{source / 'net.py'}:build", "--device",
                  "host", cwd=workspace).exit_code == 0
    pid = int(pidfile.read_text())
    wait_for(lambda: not pid_alive(pid), 5, "the factory's child to end")


def test_too_big_a_folder_is_refused_before_copying(run_np, workspace: Path, tmp_path: Path) -> None:
    from np_optimizer.models.package import MAX_FILES, WORKSPACE_MARKER, copy_package, package_layout
    from np_optimizer.workspace import WORKSPACE_FILE

    source = tmp_path / "heavy"
    (source / "data").mkdir(parents=True)
    (source / "net.py").write_text("def build():\n    pass\n")
    with open(source / "data" / "images.bin", "wb") as handle:
        handle.truncate(101 * 2**20)  # sparse: instant, and as big as it says
    result = run_np("projects", "create", "--name", "heavy", "--model", f"{source / 'net.py'}:build", "--device",
                    "host", "--json", cwd=workspace)
    assert result.exit_code == EXIT_CONFIG and result.json["code"] == "NP-MDL-413"
    assert result.json["message"] == (f"{source / 'data' / 'images.bin'} is 101.0 MiB; np copies files of at most "
                                      "100.0 MiB with the model's code.")
    assert ".npignore" in result.json["hint"] and "move datasets" in result.json["hint"]
    assert not (workspace / "heavy").exists()
    (source / "data" / "images.bin").unlink()
    for i in range(6):
        with open(source / "data" / f"part{i}.bin", "wb") as handle:
            handle.truncate((90 + i) * 2**20)
    total = run_np("projects", "create", "--name", "heavy", "--model", f"{source / 'net.py'}:build", "--device",
                   "host", "--json", cwd=workspace)
    assert total.json["code"] == "NP-MDL-413" and total.json["message"] == (
        f"{source} holds more than 500.0 MiB to copy with the model's code (largest file: "
        f"{source / 'data' / 'part5.bin'}, 95.0 MiB).")
    (source / ".npignore").write_text("*.bin\n")
    for i in range(MAX_FILES):
        (source / "data" / f"{i}.npy").write_bytes(b"")
    many = run_np("projects", "create", "--name", "heavy", "--model", f"{source / 'net.py'}:build", "--device",
                  "host", "--json", cwd=workspace)
    assert many.json["message"] == (f"{source} holds more than {MAX_FILES} files to copy with the model's code "
                                    f"({MAX_FILES - 1} of them under {source / 'data'}).")
    (source / ".npignore").write_text("*.bin\ndata/\n")
    copied = copy_package(package_layout(source / "net.py"), tmp_path / "project")
    assert sorted(p.name for p in copied.rglob("*")) == [".npignore", "net.py"]
    # a file in the workspace's own folder: np would copy the workspace into its project
    (workspace / "net.py").write_text("def build():\n    pass\n")
    inside = run_np("projects", "create", "--name", "inside", "--model", "net.py:build", "--device", "host", "--json",
                    cwd=workspace)
    assert inside.json["code"] == "NP-MDL-413" and f"lies in the np workspace {workspace}" in inside.json["message"]
    assert WORKSPACE_MARKER == WORKSPACE_FILE and not (workspace / "inside").exists()


def test_a_project_of_an_older_np_still_loads(tmp_path: Path) -> None:
    """Kind "factory": model/model.py alone, as np wrote it before packages; its errors name the line too."""
    from np_optimizer.models.source import ModelSpec, load_model

    project = tmp_path / "old"
    (project / "model").mkdir(parents=True)
    code = textwrap.dedent("""\
        import torch

        def build():
            return torch.nn.Linear(4, 2), (torch.randn(1, 4),)

        def broken():
            raise RuntimeError("weights missing")
        """)
    (project / "model" / "model.py").write_text(code)
    spec = ModelSpec("factory", name="m", file="model/model.py", factory="build", source="m.py:build")
    assert tuple(load_model(spec, project).module(torch_ones(4)).shape) == (1, 2)
    with pytest.raises(ModelError) as failed:
        load_model(ModelSpec("factory", name="m", file="model/model.py", factory="broken"), project)
    assert failed.value.message.startswith(f"{project / 'model' / 'model.py'}:7: RuntimeError: weights missing")


def torch_ones(width: int):
    import torch

    return torch.ones(1, width)
