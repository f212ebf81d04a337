"""The mixed strategy (sweep/mixed.py): its plan built from a sensitivity table (pure), each bad strategy block one
issue at its place, and one sweep end to end on Ethos-U55 where each trial's layers are the moves it was planned
from and the front's figures are the trials' own."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from np_optimizer.config.sweep import Strategy, validate_sweep
from np_optimizer.sweep import mixed
from np_optimizer.sweep.mixed import MixedPoint, apply_point, ordered_moves, plan_points, spread, uniform_points
from tests.helpers import sensitive_model_source

STRATEGY = Strategy("mixed", candidates=("W8-A8", "W8-A16"), budget="latency", points=2, measure_from="base")


def _cell(loss: float, cost: float | None) -> dict[str, Any]:
    return {"snr_loss_db": loss, "cost": cost}


def _doc() -> dict[str, Any]:
    """A layers_sensitivity.json as pipeline/sensitivity.py writes it: three layers, moves in latency order."""
    from np_optimizer.pipeline.sensitivity import greedy_moves

    rows = {"conv1": {"W8-A8": _cell(0.0, 100), "W8-A16": _cell(9.0, 130)},   # 0.3 dB per cycle
            "fc": {"W8-A8": _cell(0.0, 50), "W8-A16": _cell(1.0, 52)},        # 0.5 dB per cycle: 1/30 (the floor)
            "conv2": {"W8-A8": _cell(0.0, 400), "W8-A16": _cell(2.0, 800)}}   # 0.005 dB per cycle
    params = {"conv1": 1000, "fc": 10_000, "conv2": 50}
    return {"base": "W8-A8", "formats": ["W8-A8", "W8-A16"], "cost": {"unit": "cycles"},
            "layers": [{"module": m, "params": params[m], "formats": cells} for m, cells in rows.items()],
            "moves": greedy_moves(rows, "W8-A8")}


def test_the_plan_takes_the_first_k_moves_by_gain_per_cycle_with_both_uniform_points() -> None:
    points, why = plan_points(_doc(), STRATEGY)
    assert why is None
    assert [(p.label, p.moves) for p in points] == [("mixed", 2), ("mixed", 3)]  # spread(3, 2)
    # fc's +2 cycles are floored at the median priced move's +30 (pipeline/sensitivity.greedy_moves): 0.033 dB per cycle
    assert list(points[0].layers.items()) == [("conv1", "W8-A16"), ("fc", "W8-A16")]
    assert points[1].layers == {"fc": "W8-A16", "conv1": "W8-A16", "conv2": "W8-A16"} and points[1].scheme == "W8-A8"
    assert points[0].predicted_snr_gain_db == 10.0 and points[0].predicted_extra_cost == 32
    assert [(p.label, p.moves) for p in uniform_points(STRATEGY)] == [("W8-A8", 0), ("W8-A16", 0)]


def test_a_size_budget_prices_moves_by_weight_bytes() -> None:
    # W8-A16 keeps int8 weights: every move is free in size, so the order is by gain alone
    assert [m["module"] for m in ordered_moves(_doc(), "size", STRATEGY)] == ["conv1", "conv2", "fc"]
    floats = Strategy("mixed", candidates=("W8-A8", "float"), budget="size", points=8, measure_from="base")
    doc = _doc()
    for layer in doc["layers"]:
        layer["formats"]["float"] = layer["formats"].pop("W8-A16")
    doc["formats"] = ["W8-A8", "float"]
    points, _why = plan_points(doc, floats)  # float weights cost 3 bytes more each: gain per byte
    assert list(points[-1].layers) == ["conv2", "conv1", "fc"] and [p.moves for p in points] == [1, 2, 3]


def test_a_layer_without_a_cost_moves_after_the_priced_ones_by_gain() -> None:
    doc = _doc()
    doc["layers"].append({"module": "stem", "params": 10, "formats": {"W8-A8": _cell(0.0, None),
                                                                       "W8-A16": _cell(20.0, None)}})
    doc["layers"].append({"module": "flat", "params": 10, "formats": {"W8-A8": _cell(0.0, None),
                                                                       "W8-A16": _cell(-1.0, None)}})
    moves = ordered_moves(doc, "latency", STRATEGY)  # the file's own moves leave `stem` out: it comes after them
    assert [m["module"] for m in moves] == ["conv1", "fc", "conv2", "stem"]  # `flat` gains nothing: left out
    assert moves[-1]["extra_cost"] is None and moves[-1]["predicted_snr_gain_db"] == 32.0
    points, _why = plan_points(doc, STRATEGY)
    assert points[-1].layers["stem"] == "W8-A16" and points[-1].predicted_extra_cost is None


def test_the_spread_and_a_file_of_other_formats() -> None:
    assert spread(3, 8) == [1, 2, 3] and spread(10, 4) == [2, 5, 8, 10] and spread(0, 4) == []
    points, why = plan_points(_doc(), Strategy("mixed", candidates=("W8-A8", "float"), budget="latency", points=2,
                                               measure_from="base"))
    assert points == [] and "W8-A16" in str(why)


def test_from_widest_a_move_gains_what_the_layer_loses_when_it_alone_drops_to_the_base() -> None:
    """The file of the uniform W8-A16 trial (`sensitivity: [W8-A16, W8-A8]`): each W8-A8 cell says what the model
    loses with that layer alone in int8; moving it back up gains that much, for its extra cycles."""
    wide = Strategy("mixed", candidates=("W8-A8", "W8-A16"), budget="latency", points=8, measure_from="widest")
    doc = {"base": "W8-A16", "formats": ["W8-A16", "W8-A8"], "moves": [], "cost": {"unit": "cycles"},
           "layers": [{"module": "stem", "params": 10, "formats": {"W8-A16": _cell(0.0, 300), "W8-A8": _cell(-8.0, 100)}},
                      {"module": "body", "params": 10, "formats": {"W8-A16": _cell(0.0, 900), "W8-A8": _cell(-2.0, 500)}},
                      {"module": "head", "params": 10, "formats": {"W8-A16": _cell(0.0, 50), "W8-A8": _cell(0.5, 50)}}]}
    points, why = plan_points(doc, wide)
    assert why is None and [p.moves for p in points] == [1, 2]  # head gains nothing by moving up: never moved
    # the widest scheme (ops outside the layers stay wide), the layers not moved up dropped: stem moves first (8 dB
    # for 200 cycles), then body (2 dB for 400)
    assert [p.layers for p in points] == [{"body": "W8-A8", "head": "W8-A8"}, {"head": "W8-A8"}]
    assert all(p.scheme == "W8-A16" for p in points) and points[-1].predicted_snr_gain_db == 10.0
    assert plan_points(_doc(), wide)[0] == []  # a file measured from the base is not the one this plan reads
    params: dict[str, Any] = {}
    apply_point(params, uniform_points(wide)[1], wide)
    assert params == {"scheme": "W8-A16", "sensitivity": ["W8-A16", "W8-A8"]}
    apply_point(params, uniform_points(wide)[0], wide)
    assert params == {"scheme": "W8-A8"}


def test_the_model_input_is_a_move_like_a_layer_and_widest_is_the_default() -> None:
    """On Ethos-U the file also measures `<input>` and `<output>` (no row in Vela's table: cost 0 in each format).
    From the widest (the default), the input that loses most in int8 moves first, for free; the points drop what
    was not moved, the input included, as graph_quantize `layers:` names it."""
    config, issues = validate_sweep(yaml.safe_load(SWEEP.replace("{body}", "    points: 8\n    rest: widest\n")))
    assert config is not None and issues == [] and config.strategy.measure_from == "widest"
    doc = {"base": "W8-A16", "formats": ["W8-A16", "W8-A8"], "moves": [], "cost": {"unit": "cycles"},
           "layers": [{"module": m, "params": 0, "formats": {"W8-A16": _cell(0.0, wide), "W8-A8": _cell(loss, cost)}}
                      for m, wide, loss, cost in (("<input>", 0.0, -11.0, 0.0), ("embed", 300, -9.0, 100),
                                                  ("head", 90, -0.1, 50), ("<output>", 0.0, 0.0, 0.0))]}
    points, why = plan_points(doc, config.strategy)
    assert why is None and [p.moves for p in points] == [1, 2, 3]  # `<output>` gains nothing: never moved up
    assert points[0].layers == {"embed": "W8-A8", "head": "W8-A8", "<output>": "W8-A8"} and points[0].scheme == "W8-A16"
    assert points[0].predicted_extra_cost == 0 and points[1].predicted_extra_cost == 200
    assert points[2].layers == {"<output>": "W8-A8"} and points[2].predicted_snr_gain_db == 20.1
    # `rest: base`: the same moves over the base scheme, what no move names (softmax, adds) in int8
    over_base, _why = plan_points(doc, dataclasses.replace(config.strategy, rest="base"))
    assert [(p.scheme, p.layers) for p in over_base] == [
        ("W8-A8", {"<input>": "W8-A16"}), ("W8-A8", {"<input>": "W8-A16", "embed": "W8-A16"}),
        ("W8-A8", {"<input>": "W8-A16", "embed": "W8-A16", "head": "W8-A16"})]
    # the default, `rest: both`: each k over each scheme, told apart by their label; `points` counts trials
    default, _issues = validate_sweep(yaml.safe_load(SWEEP.replace("{body}", "    points: 4\n")))
    assert default is not None and default.strategy.rest == "both"
    both, _why = plan_points(doc, default.strategy)
    assert [(p.label, p.moves) for p in both] == [("mixed base", 2), ("mixed widest", 2), ("mixed base", 3),
                                                  ("mixed widest", 3)]  # spread(3, 2)
    assert both[0].layers == over_base[1].layers and both[1].layers == points[1].layers
    assert {p.params["mixed.scheme"] for p in both} <= set(mixed.distributions(default.strategy)["mixed.scheme"].choices)


def test_a_point_sets_the_step_and_only_the_first_measures_sensitivity() -> None:
    first, widest = uniform_points(STRATEGY)
    params: dict[str, Any] = {"scheme": "W8-A16", "layers": {"x": "float"}, "keep_float": ["y"]}
    apply_point(params, first, STRATEGY)
    assert params == {"scheme": "W8-A8", "keep_float": ["y"], "sensitivity": ["W8-A8", "W8-A16"]}
    apply_point(params, MixedPoint("W8-A8", 1, {"fc": "W8-A16"}), STRATEGY)
    assert params == {"scheme": "W8-A8", "keep_float": ["y"], "layers": {"fc": "W8-A16"}}
    apply_point(params, widest, STRATEGY)
    assert params == {"scheme": "W8-A16", "keep_float": ["y"]}


SWEEP = 'version: "1.0"\nobjectives: [{latency: min}, {snr: max}]\nstrategy:\n  mixed:\n{body}'


@pytest.mark.parametrize(("body", "code", "location", "hint"), [
    ("    candidates: [W8-A8, W8-A61]\n", "S047", "strategy.mixed.candidates[1]", "W8-A16"),
    ("    candidates: [W8-A8]\n", "S047", "strategy.mixed.candidates", "candidates: [W8-A8, W8-A16]"),
    ("    candidates: [W8-A8, W8-A8]\n", "S047", "strategy.mixed.candidates[1]", "once"),
    ("    budget: latncy\n", "S045", "strategy.mixed.budget", "latency"),
    ("    points: 0\n", "S046", "strategy.mixed.points", "points: 8"),
    ("    point: 4\n", "S044", "strategy.mixed.point", "points"),
    ("    - W8-A8\n", "S044", "strategy.mixed", "candidates: [W8-A8, W8-A16]"),
    ("    from: wides\n", "S048", "strategy.mixed.from", "Did you mean 'widest'?"),
    ("    rest: bas\n", "S049", "strategy.mixed.rest", "Did you mean 'base'?"),
])
def test_each_bad_mixed_block_is_one_issue_at_its_place(body: str, code: str, location: str, hint: str) -> None:
    config, issues = validate_sweep(yaml.safe_load(SWEEP.replace("{body}", body)))
    assert config is None and [(i.code, i.location) for i in issues] == [(code, location)]
    assert hint in str(issues[0].hint)


def test_a_misspelt_strategy_names_the_nearest_and_a_space_takes_one_value() -> None:
    _config, issues = validate_sweep(yaml.safe_load('version: "1.0"\nobjectives: [{latency: min}]\n'
                                                    'strategy: {mixd: {points: 2}}\n'))
    (found,) = [i for i in issues if i.code == "S040"]
    assert found.location == "strategy" and "Did you mean 'mixed'?" in str(found.hint)
    _config, issues = validate_sweep(yaml.safe_load(SWEEP.replace("{body}", "    points: 2\n") + "space: {graph_optimize: "
                                                    "[true, false]}\n"))
    assert [(i.code, i.location) for i in issues] == [("S043", "space")] and "mixed" in issues[0].message
    config, issues = validate_sweep(yaml.safe_load(SWEEP.replace("{body}", "    budget: size\n")))
    assert config is not None and issues == []
    assert (config.strategy.candidates, config.strategy.budget, config.strategy.points) == (("W8-A8", "W8-A16"),
                                                                                            "size", 8)


def test_a_bad_mixed_block_stops_np_sweep_with_its_line(tmp_path: Path, run_np: Any) -> None:
    (tmp_path / "sweep.yaml").write_text(SWEEP.replace("{body}", "    candidates: [W8-A8, W8-A16]\n    budget: sise\n"))
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as failed:
        load_sweep(tmp_path / "sweep.yaml")
    (found,) = failed.value.issues
    assert (found.code, found.line) == ("S045", 6) and "Did you mean 'size'?" in str(found.hint)
    assert failed.value.exit_code == 5  # as every sweep.yaml error (test_sweep_cli: exit 5)


MODEL = sensitive_model_source(64)


@pytest.mark.np_run
def test_a_mixed_sweep_runs_the_planned_moves_and_shows_their_own_figures(tmp_path: Path, run_np: Any) -> None:
    """On corstone_300 (MLIA's estimate): the uniform W8-A8 trial measures the sensitivity, then uniform W8-A16 and
    the first k moves; each trial's job.json gives its layers the formats its point names."""
    from np_optimizer import api
    from tests.helpers import make_project, run_np_subprocess

    (tmp_path / "net.py").write_text(MODEL)
    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "mix", model=f"{tmp_path / 'net.py'}:build", device="corstone_300",
                       steps="gq", run_yaml='version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n'
                                            'profile: [GRAPH_QUANTIZE]\n',
                       detail_yaml="detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 2\n")
    project = exp.parent
    (project / "sweep.yaml").write_text('version: "1.0"\nmethod: mlia\nobjectives: [{latency: min}, {snr: max}]\n'
                                        'strategy: {mixed: {candidates: [W8-A8, W8-A16], budget: latency, points: 2, '
                                        'from: base, rest: base}}\n')
    plan = run_np("sweep", "--dry-run", "--json", cwd=project).json  # the two uniform trials, each run.yaml checked
    assert (plan["strategy"], plan["budget"]) == ("mixed", 4) and [(t["params"], t["problems"]) for t in plan[
        "trials"]] == [({"mixed.scheme": f, "mixed.moves": 0}, []) for f in ("W8-A8", "W8-A16")]
    result = run_np_subprocess("sweep", "--workers", "1", cwd=project)
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())  # each mixed trial's line names its layers' formats
    assert "Greedy moves of the measured sensitivity" in said and "mixed.moves=1; cancel W8-A16" in said
    front = run_np("report", "--json", cwd=project).json["sweep"]
    trials = {(t["params"]["mixed.scheme"], t["params"]["mixed.moves"]): t for t in front["trials"]}
    first = trials[("W8-A8", 0)]
    sensitivity = json.loads((project / first["experiment"] / "01_graph_quantize" / "artifacts" /
                              "layers_sensitivity.json").read_text())
    moves = [(m["module"], m["format"]) for m in sensitivity["moves"]]
    assert moves[0] == ("cancel", "W8-A16")  # the layer built to need int16 activations
    assert set(trials) == {("W8-A8", 0), ("W8-A16", 0), *(("mixed", k) for k in spread(len(moves), 2))}
    for (label, k), trial in trials.items():
        assert trial["state"] == "complete" and trial["formats"] == dict(moves[:k]), trial
        job = json.loads((project / trial["experiment"] / "01_graph_quantize" / "job.json").read_text())
        assert job["parameters"]["scheme"] == ("W8-A8" if label == "mixed" else label)
        if k:  # job.json names each layer's format: the moved ones in theirs, the rest in the base scheme's
            got = {row["module"]: row["format"] for row in job["changes"]["layer_formats"]["by_layer"]}
            modules = ("<input>", "fc1", "cancel", "head", "<output>")  # Ethos-U: the model's input and output too
            assert got == {m: dict(moves[:k]).get(m, "W8-A8") for m in modules}, (k, got)
        # the front's figures are the trial's own estimate and SNR, not a sum of predictions
        steps = run_np("report", "--json", cwd=project / trial["experiment"]).json["pipeline"]["steps"]
        own = {m["metric_type"]: m["value"] for m in steps[-1]["metrics"]}
        assert trial["values"]["latency"] == own.get("LATENCY") and trial["values"]["snr"] == own.get("SNR"), (trial, own)
    mixed_one = trials[("mixed", spread(len(moves), 2)[0])]
    # int16 on `cancel` gains SNR on the held-out inputs too (less than on the 2 calibration samples it was measured on)
    assert mixed_one["values"]["snr"] > first["values"]["snr"]
    assert mixed_one["note"].startswith("mixed, 1 move(s): W8-A8, but cancel W8-A16 (predicted +")


def test_the_plan_line_names_the_moves_not_a_widest_point_s_dropped_layers() -> None:
    """Under `rest: both` a widest point's layers are the ones dropped to int8: the line names the base points' moves."""
    import io

    from rich.console import Console

    from np_optimizer.cli.sweep_display import SweepDisplay

    display = SweepDisplay(json_mode=False, quiet=False)
    display.console = Console(file=io.StringIO(), width=300)
    points = [MixedPoint("W8-A8", 1, {"embed": "W8-A16"}, "mixed base"),
              MixedPoint("W8-A16", 1, {"q": "W8-A8", "k": "W8-A8", "v": "W8-A8"}, "mixed widest")]
    display.event({"kind": "mixed_plan", "points": [p.to_json() for p in points], "why": None, "unit": "cycles"})
    said = display.console.file.getvalue()  # type: ignore[attr-defined]
    assert "in order: embed W8-A16; 2 more trial(s)" in said
