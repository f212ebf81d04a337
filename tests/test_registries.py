"""Every registry entry runs for real, and every list np prints or documents derives from the registries.

Parametrised over the registries themselves, so a new backend scheme, method, algorithm or error code is tested
without editing this file.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from np_optimizer.backends import backends
from np_optimizer.config.checkpoints import checkpoint_names, step_kinds
from np_optimizer.config.steps import StepSpec, step_specs
from np_optimizer.devices import DEVICES
from np_optimizer.docgen.errors import render_errors
from np_optimizer.errors import CODES, NpError
from np_optimizer.quantize.aq.catalog import ALGORITHMS
from tests.helpers import REPO, make_project, run_here, run_np_subprocess

pytestmark = pytest.mark.own_steps  # each registered step must really run

# every scheme of every backend; a backend without schemes lowers its float program (None)
_SCHEMES = [(b.name, s.name) for b in backends() for s in b.schemes] + [(b.name, None) for b in backends() if not b.schemes]


def test_errors_doc_matches_the_table() -> None:
    committed = (REPO / "docs" / "errors.md").read_text()
    assert committed == render_errors(), "docs/errors.md is stale: run `make docs`"


def test_every_code_in_the_source_is_a_row_of_the_table() -> None:
    used = {m for path in (REPO / "src").rglob("*.py") for m in re.findall(r"NP-[A-Z]+-\d{3}", path.read_text())}
    assert used - set(CODES) == set(), "add these codes to CODES in errors.py (and run `make docs`)"


def _subclasses(cls: type[NpError]) -> list[type[NpError]]:
    return [cls] + [s for sub in cls.__subclasses__() for s in _subclasses(sub)]


@pytest.mark.parametrize("cls", _subclasses(NpError), ids=lambda c: c.__name__)
def test_each_error_class_exits_as_its_code_says(cls: type[NpError]) -> None:
    assert CODES[cls.code].exit_code == cls.exit_code


def _small_model() -> tuple[object, tuple[object, ...]]:
    """A conv stem, one MobileNetV2 inverted residual (1x1 expand, 3x3 depthwise, ReLU6, 1x1 project, the skip add)
    and a linear head: the blocks of the Hugging Face MobileNetV2 that tests/models/test_zoo.py skips for time."""
    import torch

    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.expand = torch.nn.Conv2d(8, 16, 1)
            self.depthwise = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
            self.project = torch.nn.Conv2d(16, 8, 1)
            self.fc = torch.nn.Linear(8 * 8 * 8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.stem(x))
            block = torch.nn.functional.relu6(self.depthwise(torch.nn.functional.relu6(self.expand(x))))
            return self.fc((x + self.project(block)).flatten(1))

    torch.manual_seed(0)
    return Small().eval(), (torch.randn(1, 3, 8, 8),)


@pytest.mark.heavy
@pytest.mark.parametrize(("backend", "scheme"), _SCHEMES, ids=[f"{b}-{s or 'float'}" for b, s in _SCHEMES])
def test_each_backend_scheme_quantizes_and_lowers(backend: str, scheme: str | None, tmp_path: Path) -> None:
    import torch

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.quantize.pt2e import quantize_program, quantized_layers

    model, example = _small_model()
    device = next(d for d in DEVICES if d.backend == backend)
    calibration = [example] + [(torch.randn(1, 3, 8, 8),) for _ in range(3)]
    program = export_model(model, example)
    if scheme is not None:
        program = quantize_program(program, backend=backend, scheme=scheme, target=device.mlia_target,
                                   calibration=calibration)
        # each scheme's weight and activation types, as its name says (dynamic schemes leave the conv float)
        layers = [row for row in quantized_layers(program) if row["weight"] != "float"]
        weight, activation = scheme.split("_")[0].split("-")
        assert layers and {row["weight"] for row in layers} == {f"int{weight[1:]}"}, layers
        activations = {row["activation"] for row in layers}
        assert all(f"int{activation[1:]}" in a for a in activations), activations
        assert all(("dynamic" in a) == scheme.endswith("_dynamic") for a in activations), activations
    path = save_program(program, tmp_path / "model.pt2")
    compiled = compile_checkpoint(path, device, tmp_path / "compiled")
    assert compiled.status == "ok", compiled.reason
    assert compiled.num_delegates >= 1 and (tmp_path / "compiled" / str(compiled.pte_file)).is_file()
    if scheme is not None and not scheme.endswith("_dynamic"):  # the whole block runs in the delegate
        placed = json.loads((tmp_path / "compiled" / "layers_graph.json").read_text())
        convs = [op for op in placed["ops"] if "convolution" in op["op"]]
        assert len(convs) == 4 and all(op["delegated"] for op in convs), convs


def test_each_backend_has_a_device_row_and_every_row_a_backend() -> None:
    names = {b.name for b in backends()}
    assert {d.backend for d in DEVICES} == names
    for device in DEVICES:
        assert device.backend_spec.name == device.backend


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_each_aq_algorithm_row_loads_its_function(name: str) -> None:
    from np_optimizer.quantize.aq.registry import get_algorithm

    algorithm = get_algorithm(name)
    assert callable(algorithm.quantize_layer) and algorithm.implementation == ALGORITHMS[name].implementation


@pytest.mark.np_run
@pytest.mark.parametrize("spec", step_specs(), ids=lambda s: s.kind)
def test_each_step_writes_parses_and_runs(spec: StepSpec, tmp_path: Path) -> None:
    """The run.yaml lines a step's spec writes parse back to its config, and `np run` with that step alone runs its
    function on the MLP and records its checkpoint."""
    import yaml

    from np_optimizer import api
    from np_optimizer.config.run_config import validate_run
    from np_optimizer.devices import get_device

    device = get_device("raspberry_pi_5")
    text = 'version: "1.0"\nsteps:\n' + "\n".join(spec.run_yaml(device.backend)) + "\nprofile: []\n"
    config, issues = validate_run(yaml.safe_load(text), device)
    assert config is not None, issues
    (step,) = config.steps
    assert isinstance(step, spec.config_type) and step.kind == spec.kind
    assert spec.checkpoint in checkpoint_names() and spec.kind in step_kinds()
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "steps", run_yaml=text)
    summary = api.run(experiment=str(exp))
    assert summary.status == "success", summary.error
    (job,) = [j for j in summary.jobs if j.name == f"01_{spec.kind}"]
    assert job.status == "success" and (exp / job.name / "artifacts" / "model.pt2").is_file()


def _methods() -> list[str]:
    from np_optimizer.profiler.methods import get_method, registered_methods

    get_method("mlia")  # importing the method modules registers them
    return list(registered_methods())


@pytest.fixture(scope="module")
def finished_on_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished experiment on `host` (mlp, graph_optimize); each method test profiles a copy of it."""
    from np_optimizer import api

    root = tmp_path_factory.mktemp("methods")
    api.workspace_init(root / "ws")
    exp = make_project(root / "ws", "methods", device="host", run_yaml='version: "1.0"\nsteps:\n- graph_optimize: null\n')
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NP_CACHE_DIR", str(root / "cache"))
        run_here(exp)
    return exp


@pytest.mark.np_run
@pytest.mark.parametrize("method", _methods())
def test_each_method_profiles_a_checkpoint_on_this_machine(method: str, finished_on_host: Path, tmp_path: Path,
                                                          run_np) -> None:
    shutil.copytree(finished_on_host.parents[1], tmp_path / "ws")
    exp = tmp_path / "ws" / finished_on_host.parent.name / finished_on_host.name
    options = ["--profile-opt", "num_executions=3"] if method == "on-device" else []
    result = run_np("profile", "INPUT_MODEL", "--method", method, *options, "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout
    (profiled,) = result.json["results"]
    assert profiled["status"] == "SUCCESS" and profiled["method"] == method
    assert {m["metric_type"] for m in profiled["metrics"]} >= {"MACS", "PARAMS"}


@pytest.mark.np_run
def test_np_run_exits_4_when_the_device_cannot_be_reached(workspace: Path, run_np, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NP_SSH_KNOWN_HOSTS", str(tmp_path / "known_hosts"))
    exp = make_project(workspace, "unreachable", run_yaml='version: "1.0"\nsteps:\n- graph_optimize: null\n'
                       'profile:\n- GRAPH_OPTIMIZE\n')
    (workspace / "devices.yaml").write_text(
        "devices:\n  raspberry_pi_5:\n    ssh: pi@127.0.0.1\n    port: 1\n    connect_timeout: 5\n")
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 4, result.stdout
    (profiled,) = result.json["profile"]
    assert profiled["error"]["code"] == "NP-DEV-503" and profiled["method"] == "on-device"


def test_the_catalogue_offers_exactly_the_registered_methods() -> None:
    from np_optimizer.devices import METHODS

    assert set(METHODS) == set(_methods())
    assert {m.method for d in DEVICES for m in d.methods} <= set(_methods())


def _renderers() -> list[str]:
    from np_optimizer.cli.views.base import RENDERERS

    return list(RENDERERS.names())


@pytest.fixture(scope="module")
def profiled_on_host(finished_on_host: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of finished_on_host with INPUT_MODEL and GRAPH_OPTIMIZE profiled (per-layer rows by MACs)."""
    root = tmp_path_factory.mktemp("profiled")
    shutil.copytree(finished_on_host.parents[1], root / "ws")
    exp = root / "ws" / finished_on_host.parent.name / finished_on_host.name
    result = run_np_subprocess("profile", "INPUT_MODEL", "GRAPH_OPTIMIZE", "--method", "mlia", cwd=exp,
                               env={"NP_CACHE_DIR": str(root / "cache")})
    assert result.exit_code == 0, result.stderr
    return exp


@pytest.mark.np_run
@pytest.mark.parametrize("name", _renderers())
def test_each_renderer_renders_a_real_record(name: str, profiled_on_host: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Every registered renderer, on the record of its view from a real run: a renderer added without a record here
    fails (KeyError)."""
    from np_optimizer.api.layers import compare, layers_report
    from np_optimizer.api.report import report
    from np_optimizer.cli.views import render

    view, fmt = name.split("/")
    experiment = str(profiled_on_host)
    build = {"report": lambda: report(experiment=experiment, check=True, budgets=["latency_ms=1000"], check_all=True),
             "layers": lambda: layers_report(experiment=experiment, checkpoint="GRAPH_OPTIMIZE", top=5),
             "compare": lambda: compare(experiment=experiment, checkpoints=["INPUT_MODEL", "GRAPH_OPTIMIZE"])}
    record = build[view]()
    capsys.readouterr()
    written = render(view, fmt, record, tmp_path / f"out.{fmt}" if fmt in ("html", "junit") else None)
    shown = written.read_text(encoding="utf-8") if written is not None else capsys.readouterr().out
    assert "graph_optimize" in shown.lower()


def test_the_generic_registry_refuses_duplicates_and_names_the_nearest_entry() -> None:
    from np_optimizer.registry import DuplicateEntryError, Registry

    registry: Registry[int] = Registry("colour")
    registry.register("red", 1)
    registry.register("green", 2)
    with pytest.raises(DuplicateEntryError):
        registry.register("red", 3)
    with pytest.raises(NpError) as unknown:
        registry.get("gren")
    assert unknown.value.code == "NP-CFG-422" and "Did you mean 'green'?" in str(unknown.value.hint)
    assert registry.names() == ("red", "green") and registry.find("blue") is None


def test_running_one_aq_algorithm_imports_only_its_own_module() -> None:
    """The AQ registry imports the asked-for algorithm's module, not every algorithm (AWQ alone imports torchao's
    prototypes, about 1.5 s)."""
    import subprocess
    import sys

    code = ("import sys; from np_optimizer.quantize.aq.registry import get_algorithm; get_algorithm('RTN'); "
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('np_optimizer.quantize.aq.') "
            "and m.rsplit('.', 1)[1] in ('rtn', 'awq', 'gptq', 'smoothquant', 'autoround')))")
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "['rtn']"
