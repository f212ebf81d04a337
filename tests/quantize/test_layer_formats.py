"""graph_quantize's `layers:`: per-layer formats over the step's scheme.

Bad input through the real loader (a line with its place and a hint each); the resolution rules on their own; then the
target's tools: mixed int8/int16 lowered through TOSA and Vela and estimated whole by MLIA on an Ethos-U55
(corstone_300) and an Ethos-U85 (alif_e8), and mixed static/dynamic/4-bit on XNNPACK measured on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.config import check_experiment_config
from np_optimizer.devices import get_device
from np_optimizer.quantize.layer_formats import LayerFormats, NodeKey
from tests.helpers import make_project

MODEL = '''
import torch
from torch import nn


class Tiny(nn.Module):
    """Two convolutions, then one attention-like block: two matmuls of activations (the Ethos-U55 int16 limit)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                                      nn.ReLU())
        self.attn = nn.Linear(8, 8)
        self.classifier = nn.Linear(8, 4)

    def forward(self, x):
        t = self.features(x).flatten(2).transpose(1, 2)
        scores = torch.matmul(self.attn(t), t.transpose(1, 2)).softmax(-1)
        return self.classifier(torch.matmul(scores, t).mean(1))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def build():
    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(1, 3, 8, 8),)


def build_mlp():
    torch.manual_seed(0)
    return Mlp().eval(), (torch.randn(1, 32),)
'''
DETAIL = "detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 2\n"


def _run_yaml(scheme: str, layers: str, profile: bool = True) -> str:
    return (f'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: {scheme}\n    layers:\n{layers}'
            + ("profile:\n- GRAPH_QUANTIZE\n" if profile else ""))


def _check(tmp_path: Path, run_yaml: str, device: str, graph: list[NodeKey] | None = None) -> Any:
    (tmp_path / "run.yaml").write_text(run_yaml)
    model = {"kind": "file", "graph": graph} if graph is not None else None
    return check_experiment_config(tmp_path / "run.yaml", get_device(device), model=model)


def _tiny_graph() -> list[NodeKey]:
    """The node keys of the tiny model as np run exports it (no file, no project: the loader's own input)."""
    import torch

    from np_optimizer.quantize.layer_formats import program_keys

    namespace: dict[str, Any] = {}
    exec(MODEL, namespace)  # noqa: S102 - the test's own model source, also written to a file for the np runs
    model, example = namespace["build"]()
    return program_keys(torch.export.export(model, example))


# -- bad input: each a line with its location and a hint ---------------------------------------------------------------

@pytest.mark.parametrize(("layers", "device", "code", "location", "says"), [
    ('      "features.0": W8-A17\n', "corstone_300", "R035", "steps[0].graph_quantize[0].layers.features.0",
     "Did you mean 'W8-A16'?"),
    ('      "features.0": W8-A8_dynamic\n', "alif_e8", "R036", "steps[0].graph_quantize[0].layers.features.0",
     "Formats for ethos-u: W8-A8, W8-A16, float"),
    ("      - features.0\n", "raspberry_pi_5", "R034", "steps[0].graph_quantize[0].layers", "Example:"),
    ('      "<inptu>": W8-A16\n', "corstone_300", "R045", "steps[0].graph_quantize[0].layers.<inptu>",
     "Did you mean '<input>'?"),
    ('      "<output>": float\n', "alif_e8", "R045", "steps[0].graph_quantize[0].layers.<output>",
     "Give that layer float instead"),
    ('      "<input>": W8-A8_dynamic\n', "raspberry_pi_5", "R045", "steps[0].graph_quantize[0].layers.<input>",
     "Give that layer the format instead"),
], ids=["unknown-format", "format-the-device-lacks", "not-a-mapping", "misspelt-io", "float-io", "io-on-xnnpack"])
def test_bad_layers_entry_is_a_line_with_a_hint(tmp_path: Path, layers: str, device: str, code: str, location: str,
                                                says: str) -> None:
    config, issues = _check(tmp_path, _run_yaml("W8-A8", layers), device)
    found = [i for i in issues if i.code == code]
    assert config is None and found, [(i.code, i.message) for i in issues]
    assert found[0].location == location and not found[0].is_warning
    assert (found[0].line, found[0].column) == ((5, 5) if code == "R034" else (6, 7))  # the key, or the entry
    assert says in found[0].hint


def test_model_checks_find_the_unmatched_pattern_and_the_refused_int16(tmp_path: Path) -> None:
    """With the model's graph: a pattern matching no module is a warning naming the nearest paths; W8-A16 forced on
    the attention block of an Ethos-U55 is an error (its matmuls), on an Ethos-U85 it is not."""
    graph = _tiny_graph()
    layers = '      "features.9": W8-A16\n      "*": W8-A16\n      "attn": W8-A8\n'
    config, issues = _check(tmp_path, _run_yaml("W8-A8", layers), "corstone_300", graph)
    by_code = {i.code: i for i in issues}
    assert config is None and set(by_code) == {"R037", "R038"}, [(i.code, i.message) for i in issues]
    unmatched, refused = by_code["R037"], by_code["R038"]
    assert unmatched.is_warning and (unmatched.line, unmatched.column) == (6, 7)
    assert unmatched.hint.startswith("Nearest module paths: features.3, features.2")
    assert not refused.is_warning and refused.location.endswith("layers.*") and refused.line == 7
    assert "int16 matmul not supported on U55" in refused.message and "matmul" in refused.message
    config, issues = _check(tmp_path, _run_yaml("W8-A8", layers), "alif_e8", graph)
    assert config is not None and [i.code for i in issues] == ["R037"]
    assert config.run.steps[0].layers == (("features.9", "W8-A16"), ("*", "W8-A16"), ("attn", "W8-A8"))


def test_without_layers_only_the_u55_int16_matmuls_leave_the_scheme() -> None:
    """No `layers:`: the step keeps its one-scheme quantizer, except where the backend refuses the scheme (W8-A16's
    matmuls on an Ethos-U55), which np moves to int8 itself, no error."""
    from np_optimizer.config.layer_formats import step_formats

    graph = _tiny_graph()
    formats, issues, moved = step_formats("W8-A16", (), graph, get_device("corstone_300"))
    assert formats is not None and issues == []
    assert moved == [("matmul", "int16 matmul not supported on U55: int8"),
                     ("matmul_1", "int16 matmul not supported on U55: int8")]
    assert step_formats("W8-A16", (), graph, get_device("alif_e8"))[0] is None
    assert step_formats("W8-A8", (), graph, get_device("corstone_300"))[0] is None


def test_np_validate_loads_the_model_and_shows_both(tmp_path: Path) -> None:
    from np_optimizer import api

    (tmp_path / "tiny.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    layers = '      "featurs.0": W8-A16\n      "*": W8-A16\n'
    exp = make_project(tmp_path / "ws", "validate", model=f"{tmp_path / 'tiny.py'}:build", device="corstone_300",
                       steps="gq", run_yaml=_run_yaml("W8-A8", layers))
    report = api.validate(experiment=str(exp))
    assert not report.is_valid
    assert [(i.code, i.line) for i in report.issues] == [("R037", 6), ("R038", 7)]
    assert report.issues[0].hint.startswith("Nearest module paths: features.0")


# -- the rules --------------------------------------------------------------------------------------------------------

def test_last_matching_pattern_wins_then_keep_float_then_the_backend_limit() -> None:
    from np_optimizer.backends.ethos_u import ethos_u_format_limit

    formats = LayerFormats("W8-A16", (("features", "W8-A8"), ("features.2", "W8-A16"), ("block*.fc", "float")),
                           float_modules=frozenset({"features.2.1"}), limit=ethos_u_format_limit,
                           target="ethos-u55-128")
    conv = NodeKey(("features", "features.0"), "aten.conv2d.default", "conv2d")
    assert formats.choice(conv).format == "W8-A8" and formats.choice(conv).why == "layers: 'features'"
    inner = NodeKey(("features", "features.2", "features.2.0"), "aten.conv2d.default", "conv2d_1")
    assert formats.choice(inner).format == "W8-A16"
    assert formats.choice(NodeKey(("features", "features.2", "features.2.1"), "aten.relu.default", "r")).why == \
        "keep_float"
    assert formats.choice(NodeKey(("block3", "block3.fc"), "aten.linear.default", "l")).format == "float"
    matmul = NodeKey(("",), "aten.matmul.default", "matmul")
    assert formats.choice(matmul).format == "W8-A8" and "U55" in formats.choice(matmul).why
    assert formats.refused(matmul) is None  # the scheme gave it int16, not a pattern: np moves it, no error
    assert formats.unmatched([conv, inner, matmul]) == ["block*.fc"]
    u85 = LayerFormats("W8-A16", limit=ethos_u_format_limit, target="ethos-u85-256")
    assert u85.choice(matmul).format == "W8-A16"


def _tiny_program() -> Any:
    import torch

    namespace: dict[str, Any] = {}
    exec(MODEL, namespace)  # noqa: S102 - the test's own model source
    model, example = namespace["build_mlp"]()
    return torch.export.export(model, example), example


def test_the_model_input_and_output_take_the_format_their_reserved_name_gives() -> None:
    """`<input>` and `<output>` are the program's user inputs and its output node: their own keys (the weights are
    not inputs), `*` covers them as before, an exact name overrides it, and job.json's rows name them on Ethos-U."""
    from np_optimizer.config.layer_formats import step_formats
    from np_optimizer.quantize.layer_formats import INPUT, OUTPUT, program_keys
    from np_optimizer.quantize.pt2e import format_rows

    program, _example = _tiny_program()
    keys = program_keys(program)
    assert (keys[0].paths, keys[0].op, keys[-1].paths) == ((INPUT,), "placeholder", (OUTPUT,))
    assert sum(k.paths == (INPUT,) for k in keys) == 1  # one user input; the weights are not inputs
    formats, issues, _moved = step_formats("W8-A8", (("*", "W8-A16"), (INPUT, "W8-A8")), keys, get_device("alif_e8"))
    assert formats is not None and issues == []
    assert formats.choice(keys[0]).why == "layers: '<input>'" and formats.choice(keys[-1]).format == "W8-A16"
    rows = format_rows(formats, program, frozenset(), io=True)
    assert [(r["module"], r["format"]) for r in rows] == [(INPUT, "W8-A8"), ("fc1", "W8-A16"), ("fc2", "W8-A16"),
                                                          ("head", "W8-A16"), (OUTPUT, "W8-A16")]
    assert [r["module"] for r in format_rows(formats, program, frozenset())] == ["fc1", "fc2", "head"]  # XNNPACK
    # an input given the scheme's format is still a mix for the quantizer only when it differs from the scheme
    assert step_formats("W8-A8", ((INPUT, "W8-A8"),), keys, get_device("alif_e8"))[0] is not None
    assert formats.unmatched(keys) == []


def test_an_int16_input_is_quantized_in_int16_before_an_int8_layer_reads_it() -> None:
    """The Arm quantizer annotates the placeholder itself: without `<input>` an int16 first layer reads an input
    first rounded to int8 (the scheme's), with it the input's own quantize is int16."""
    from np_optimizer.quantize.layer_formats import INPUT
    from np_optimizer.quantize.pt2e import quantize_program

    program, example = _tiny_program()

    def input_dtype(layers: tuple[tuple[str, str], ...]) -> str:  # the dtype of the input's own quantize
        formats = LayerFormats("W8-A8", layers, target="ethos-u85-256")
        quantized = quantize_program(program, backend="ethos-u", scheme="W8-A8", target="ethos-u85-256",
                                     calibration=[example], formats=formats)
        (x,) = [n for n in quantized.graph.nodes if n.op == "placeholder" and n.name in
                quantized.graph_signature.user_inputs]
        (first,) = x.users
        return str(first.args[-1])

    assert input_dtype((("fc1", "W8-A16"), (INPUT, "W8-A16"))) == "torch.int16"  # without `<input>`: int8


# -- on the target's tools --------------------------------------------------------------------------------------------

def _by_layer(exp: Path) -> list[dict[str, Any]]:
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    rows: list[dict[str, Any]] = job["changes"]["layer_formats"]["by_layer"]
    return rows


def _estimated_whole(exp: Path) -> dict[str, Any]:
    report = json.loads((exp / "report.json").read_text())
    round_ = next(r for r in report["profile"]["results"] if r["checkpoint"] == "GRAPH_QUANTIZE")
    compiled = json.loads(next((exp / "01_graph_quantize").rglob("compile.json")).read_text())
    latency = next(m for m in round_["metrics"] if m["metric_type"] == "LATENCY")
    assert round_["status"] == "SUCCESS" and latency["value"] > 0 and not round_["partial"]
    assert compiled["num_delegates"] == 1  # one NPU partition: MLIA's estimate covers the whole model
    return compiled


@pytest.mark.np_run
@pytest.mark.parametrize(("device", "scheme", "layers", "expected"), [
    # U55: int16 everywhere but the classifier; np gives the attention matmuls int8 itself (the NPU refuses int16)
    ("corstone_300", "W8-A16", '      "classifier": W8-A8\n',
     {"features.0": ("W8-A16", "scheme W8-A16"), "classifier": ("W8-A8", "layers: 'classifier'"),
      "": ("W8-A8", "int16 matmul not supported on U55: int8")}),
    # U85: int8 everywhere but the first convolution
    ("alif_e8", "W8-A8", '      "features.0": W8-A16\n',
     {"features.0": ("W8-A16", "layers: 'features.0'"), "features.2": ("W8-A8", "scheme W8-A8"),
      "attn": ("W8-A8", "scheme W8-A8")}),
], ids=["u55", "u85"])
def test_mixed_int8_int16_compiles_in_one_npu_partition_and_is_estimated(
        tmp_path: Path, device: str, scheme: str, layers: str, expected: dict[str, tuple[str, str]]) -> None:
    from np_optimizer import api

    (tmp_path / "tiny.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "mixed", model=f"{tmp_path / 'tiny.py'}:build", device=device, steps="gq",
                       run_yaml=_run_yaml(scheme, layers), detail_yaml=DETAIL)
    assert api.run(experiment=str(exp)).status == "success"
    rows = _by_layer(exp)
    assert {r["module"] for r in rows} >= {"features.0", "features.2", "attn", "classifier", *expected}
    for row in rows:
        if row["module"] in expected:
            assert (row["format"], row["why"]) == expected[row["module"]], row
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    activations = {r["module"]: r["activation"] for r in job["changes"]["layers"]}
    assert activations["features.0"] == "int16" and activations["classifier"].startswith("int8")
    _estimated_whole(exp)


@pytest.mark.np_run
def test_mixed_static_dynamic_4bit_on_xnnpack_is_measured_on_host(tmp_path: Path) -> None:
    from np_optimizer import api

    (tmp_path / "tiny.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    layers = '      "fc2": W8-A8_dynamic\n      "head": W4-A8_dynamic\n'
    exp = make_project(tmp_path / "ws", "cpu", model=f"{tmp_path / 'tiny.py'}:build_mlp", device="raspberry_pi_5",
                       steps="gq", run_yaml=_run_yaml("W8-A8", layers, profile=False), detail_yaml=DETAIL)
    assert api.run(experiment=str(exp)).status == "success"
    assert {r["module"]: r["format"] for r in _by_layer(exp)} == \
        {"fc1": "W8-A8", "fc2": "W8-A8_dynamic", "head": "W4-A8_dynamic"}
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    made = {r["module"]: (r["weight"], r["activation"]) for r in job["changes"]["layers"]}
    assert "dynamic" not in made["fc1"][1] and "dynamic" in made["fc2"][1] and made["head"][0].startswith("int4")
    measured = api.profile(["graph_quantize"], experiment=str(exp), method="on-device", device="host",
                           profile_opts={"num_executions": 3, "warmup": 1})
    assert [r.status for r in measured.results] == ["SUCCESS"], [r.error for r in measured.results]
    compiled = json.loads(next((exp / "01_graph_quantize").rglob("compile.json")).read_text())
    assert compiled["num_delegates"] >= 1 and "aten.linear" not in (compiled.get("non_delegated_histogram") or {})
