"""graph_quantize's `sensitivity:`: each weighted layer's SNR loss and cost per format, on the target's own tools.

A small MLP with one layer built to need wide activations: `cancel` adds a large bias to every output and subtracts
its two halves, so its true output is a small difference of two large numbers. In int8 activations (W8-A8 on Ethos-U,
static W8-A8 on XNNPACK) the difference drowns in the rounding of the large numbers; in int16 (W8-A16) or dynamic
activations (its output then stays float on XNNPACK) it survives. That layer must rank first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.config import check_experiment_config
from np_optimizer.devices import get_device
from tests.helpers import make_project, sensitive_model_source

MODEL = sensitive_model_source(256)
DETAIL = "detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 2\n"


def _run_yaml(sensitivity: str) -> str:
    return f'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n    sensitivity: {sensitivity}\nprofile: []\n'


@pytest.mark.parametrize(("value", "device"), [("[W8-A8]", "corstone_300"), ("[W8-A8, W8-A8]", "corstone_300"),
                                              ("[W8-A8, W4-A8_dynamic]", "corstone_300"), ("fast", "host")])
def test_bad_sensitivity_is_a_line_with_a_hint(tmp_path: Path, value: str, device: str) -> None:
    (tmp_path / "run.yaml").write_text(_run_yaml(value))
    config, issues = check_experiment_config(tmp_path / "run.yaml", get_device(device))
    found = [i for i in issues if i.code == "R039"]
    assert config is None and len(found) == 1, [(i.code, i.message) for i in issues]
    assert found[0].location.endswith(".sensitivity") and found[0].line == 5 and not found[0].is_warning
    assert "sensitivity: [W8-A8, W8-A16]" in str(found[0].hint)


def test_greedy_moves_order_by_gain_per_unit_of_cost_a_free_move_priced_as_a_typical_one() -> None:
    from np_optimizer.pipeline.sensitivity import greedy_moves

    def cells(loss16: float | None, cost8: float, cost16: float) -> dict[str, dict[str, Any]]:
        return {"W8-A8": {"snr_loss_db": 0.0, "cost": cost8}, "W8-A16": {"snr_loss_db": loss16, "cost": cost16}}

    # priced above zero: a +300, b +20, c +100, nearly +1 (median 60); `free` (-10), `nearly` and b are priced at 60,
    # and so is `unpriced` (the table has no W8-A16 row for it): b 0.067 dB per unit, unpriced 0.05, nearly 0.033,
    # a 0.02, free 0.017, c 0.005. Without the floor `free` and `nearly` would go first (the table's 0 and 1 leave out
    # the RESCALEs a move adds at its boundaries) and `unpriced` last
    rows = {"a": cells(6.0, 100, 400), "b": cells(4.0, 100, 120), "c": cells(0.5, 100, 200),
            "free": cells(1.0, 50, 40), "nearly": cells(2.0, 10, 11), "none": cells(0.0, 10, 20),
            "unmeasured": cells(None, 10, 20), "unpriced": {"W8-A8": {"snr_loss_db": 0.0, "cost": 10},
                                                             "W8-A16": {"snr_loss_db": 3.0, "cost": None}}}
    moves = greedy_moves(rows, "W8-A8")
    assert [m["module"] for m in moves] == ["b", "unpriced", "nearly", "a", "free", "c"]
    assert [m["extra_cost"] for m in moves] == [20, None, 1, 300, -10, 100]  # the table's own figures
    assert [m["predicted_extra_cost"] for m in moves[:2]] == [20, None] and moves[-1]["predicted_extra_cost"] is None
    assert moves[-1]["predicted_snr_gain_db"] == 16.5
    # no move costs more than nothing: by gain, the unpriced one priced free too; weight bytes (exact) leave it out
    free = {"x": cells(1.0, 5, 5), "y": cells(2.0, 5, 4), "z": {"W8-A8": {"snr_loss_db": 0.0, "cost": 5},
                                                               "W8-A16": {"snr_loss_db": 1.5, "cost": None}}}
    assert [m["module"] for m in greedy_moves(free, "W8-A8")] == ["y", "z", "x"]
    assert [m["module"] for m in greedy_moves({**rows, **free}, "W8-A8", measured=False)] == [
        "y", "free", "x", "nearly", "b", "a", "c"]

def test_the_validation_split_is_the_dataset_past_the_calibration_and_evaluation_samples(tmp_path: Path) -> None:
    """The sensitivity's held-out inputs (pipeline/sensitivity.py): files that neither calibrate nor score a trial."""
    import torch

    from np_optimizer.models.inputs import evaluation_inputs, validation_inputs

    example = (torch.zeros(1, 3),)
    for i in range(13):
        torch.save(torch.full((1, 3), float(i)), tmp_path / f"{i:03d}.pt")
    seen = validation_inputs(tmp_path, example, skip=4 + 7, limit=16)  # 4 calibrate, the example and 7 evaluate
    evaluated = evaluation_inputs(tmp_path, example, 8, seed=0, skip=4)
    assert [int(x[0][0, 0]) for x in seen.samples] == [11, 12] and "after the first 11" in seen.source
    assert not {int(x[0][0, 0]) for x in seen.samples} & {int(x[0][0, 0]) for x in evaluated.samples[1:]}
    assert [int(x[0][0, 0]) for x in validation_inputs(tmp_path, example, 4, limit=2).samples] == [4, 5]
    assert validation_inputs(tmp_path, example, 20, 16).samples == [] == validation_inputs(None, example, 0, 16).samples


def _run(tmp_path: Path, device: str, sensitivity: str) -> tuple[Path, dict[str, Any]]:
    from np_optimizer import api

    (tmp_path / "net.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "sens", model=f"{tmp_path / 'net.py'}:build", device=device, steps="gq",
                       run_yaml=_run_yaml(sensitivity), detail_yaml=DETAIL)
    assert api.run(experiment=str(exp)).status == "success"
    doc = json.loads((exp / "01_graph_quantize" / "artifacts" / "layers_sensitivity.json").read_text())
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    assert job["changes"]["sensitivity"]["most_sensitive"] == "cancel"
    # no dataset, so no held-out split: the calibration samples alone, as the file says
    assert (doc["snr"]["calibration_samples"], doc["snr"]["validation_samples"]) == (2, 0)
    # each format's per-layer file is kept; its compile and round (a .pt2, a .pte, Vela's output) are not
    kept = sorted(p.name for p in (exp / "01_graph_quantize" / "artifacts" / "sensitivity").iterdir())
    assert kept == sorted(f"{fmt}.layers.json" for fmt in doc["formats"]) == sorted(
        Path(name).name for name in doc["cost"]["files"].values())
    return exp, doc


def _check(doc: dict[str, Any], formats: list[str], unit: str) -> None:
    assert doc["formats"] == formats and doc["cost"]["unit"] == unit
    assert [layer["module"] for layer in doc["layers"]][0] == "cancel"  # the layer built to be sensitive
    io = {"<input>", "<output>"} if unit == "cycles" else set()  # Ethos-U: the model's input and output too
    assert {layer["module"] for layer in doc["layers"]} == {"fc1", "cancel", "head", *io}
    for layer in doc["layers"]:
        for fmt in formats:
            cell = layer["formats"][fmt]
            # Vela's cycles are never 0 (the input and output have no row: 0); XNNPACK times its ops in whole
            # microseconds, so a tiny layer may read 0 ms
            assert cell["snr_loss_db"] is not None and cell["cost"] is not None, (layer, fmt)
            assert cell["cost"] == 0 if layer["module"] in io else cell["cost"] > 0 if unit == "cycles" \
                else cell["cost"] >= 0, (layer, fmt)
    loss = {layer["module"]: layer["formats"][formats[1]]["snr_loss_db"] for layer in doc["layers"]}
    assert loss["cancel"] > 10 and loss["cancel"] > loss["fc1"] + 10 and loss["cancel"] > loss["head"] + 10, loss


def _report(exp: Path, run_np: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "250")
    result = run_np("report", "--layers", cwd=exp)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


@pytest.mark.np_run
def test_sensitivity_and_vela_cycles_per_format_on_ethos_u55(tmp_path: Path, run_np: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    exp, doc = _run(tmp_path, "corstone_300", "[W8-A8, W8-A16]")
    _check(doc, ["W8-A8", "W8-A16"], "cycles")
    assert doc["cost"]["method"] == "mlia" and set(doc["cost"]["totals"]) == {"W8-A8", "W8-A16"}
    text = _report(exp, run_np, monkeypatch)
    assert "SNR loss vs W8-A16 (dB)" in text and "W8-A8 (Cycles)" in text and "W8-A16 (Cycles)" in text
    assert text.index("cancel") < text.index("fc1") and "Greedy move" in text
    assert doc["moves"][0]["module"] == "cancel" and doc["moves"][0]["format"] == "W8-A16"


@pytest.mark.np_run
def test_sensitivity_and_traced_times_per_format_on_xnnpack(tmp_path: Path, run_np: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    exp, doc = _run(tmp_path, "raspberry_pi_5", "true")
    _check(doc, ["W8-A8", "W8-A8_dynamic"], "ms")
    assert doc["cost"]["method"] == "on-device" and doc["cost"]["measured_on"] == "host"
    assert all(doc["cost"]["totals"][fmt] > 0 for fmt in ("W8-A8", "W8-A8_dynamic"))
    assert all(layer["formats"][fmt]["cost"] > 0 for layer in doc["layers"] if layer["module"] != "head"
               for fmt in ("W8-A8", "W8-A8_dynamic"))  # wide enough to take whole microseconds
    text = _report(exp, run_np, monkeypatch)
    assert "SNR loss vs W8-A8_dynamic (dB)" in text and "W8-A8_dynamic (Time (ms))" in text
