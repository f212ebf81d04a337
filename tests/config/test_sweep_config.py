"""sweep.yaml: its schema (issues with codes and locations) and the trials a grid makes, each a valid run.yaml for
the project's device. Pure parsing: no torch."""

from __future__ import annotations

from typing import Any

import yaml

from np_optimizer.config.run_config import validate_run
from np_optimizer.config.sweep import validate_sweep
from np_optimizer.config.sweep_space import trial_runs
from np_optimizer.devices import get_device
from np_optimizer.metrics import MetricType

SWEEP = """
version: "1.0"
space:
  graph_optimize: [true, false]
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic]
objectives: [{latency: min}, {snr: max}]
constraints: ["latency <= 0.02 s", "snr >= 30"]
strategy: {optuna: {trials: 4, seed: 7}}
"""
BASE_RUN = {"version": "1.0", "steps": [{"graph_optimize": None}, {"graph_quantize": [{"scheme": "W8-A8"}]}],
            "profile": ["INPUT_MODEL", "GRAPH_OPTIMIZE", "GRAPH_QUANTIZE"]}


def _codes(text: str) -> dict[str, str]:
    _config, issues = validate_sweep(yaml.safe_load(text))
    return {i.code: i.location for i in issues}


def test_a_sweep_is_parsed_with_limits_in_stored_units() -> None:
    sweep, issues = validate_sweep(yaml.safe_load(SWEEP))
    assert sweep is not None and issues == []
    assert [(o.metric, o.maximize) for o in sweep.objectives] == [(MetricType.LATENCY, False), (MetricType.SNR, True)]
    latency, snr = sweep.constraints
    assert latency.limit == 20.0 and latency.holds(19.9) and not latency.holds(20.1)  # 0.02 s stored in ms
    assert snr.op == ">=" and snr.limit == 30.0
    assert (sweep.strategy.name, sweep.strategy.trials, sweep.strategy.seed) == ("optuna", 4, 7)


def test_each_mistake_is_one_issue_at_its_place() -> None:
    codes = _codes("""
version: "1.0"
spaces: {}
space:
  graph_quantise.scheme: [W8-A8]
  graph_quantize.scheme: W8-A8
  graph_optimize: [yes please]
objectives: [{latencyy: min}, {snr: up}]
constraints: ["latency about 20", "memory <= 3 dB"]
strategy: random
""")
    assert codes == {"S002": "spaces", "S011": "space.graph_quantise.scheme", "S012": "space.graph_optimize",
                     "S022": "objectives[0]", "S021": "objectives[1].snr", "S031": "constraints[0]",
                     "S032": "constraints[1]", "S040": "strategy"}
    # the first S012 (a value, not a list) is reported too: one issue per entry
    _config, issues = validate_sweep(yaml.safe_load("version: '1.0'\nspace: {graph_quantize.scheme: W8-A8}\n"
                                                    "objectives: [{latency: min}]\n"))
    assert [(i.code, i.location) for i in issues] == [("S012", "space.graph_quantize.scheme")]


def test_the_grid_gives_valid_run_yamls_for_the_device() -> None:
    sweep, _issues = validate_sweep(yaml.safe_load(SWEEP))
    assert sweep is not None
    trials = trial_runs(sweep, BASE_RUN)
    assert [values for values, _run in trials] == [
        {"graph_optimize": go, "graph_quantize.scheme": scheme}
        for go in (True, False) for scheme in ("W8-A8", "W8-A8_dynamic")]
    device = get_device("raspberry_pi_5")
    for values, run in trials:
        config, issues = validate_run(run, device)
        assert config is not None, (values, [i.message for i in issues])
        assert ("graph_optimize" in config.step_kinds) == values["graph_optimize"]
        assert config.steps[-1].scheme == values["graph_quantize.scheme"]  # type: ignore[attr-defined]
        # a step turned off takes its checkpoint out of the profile list
        assert ("GRAPH_OPTIMIZE" in (config.profile or ())) == values["graph_optimize"]
    assert BASE_RUN["steps"][0] == {"graph_optimize": None}  # the base is never changed


def test_a_step_turned_on_goes_where_the_pipeline_puts_it() -> None:
    sweep, _issues = validate_sweep(yaml.safe_load(
        "version: '1.0'\nspace: {graph_optimize: [true]}\nobjectives: [{pte_size: min}]\n"))
    assert sweep is not None
    base: dict[str, Any] = {"version": "1.0", "steps": [{"graph_quantize": [{"scheme": "W8-A8"}]}]}
    (_values, run), = trial_runs(sweep, base)
    assert [next(iter(s)) for s in run["steps"]] == ["graph_optimize", "graph_quantize"]


def test_run_detail_options_and_ranges_are_dimensions_too() -> None:
    from np_optimizer.config.detail_config import validate_detail
    from np_optimizer.config.sweep_space import detail_for

    sweep, issues = validate_sweep(yaml.safe_load("""
version: "1.0"
space:
  graph_quantize.calibration.num_samples: {from: 8, to: 32, step: 8}
  graph_optimize: [true, false]
objectives: [{snr: max}]
"""))
    assert sweep is not None, issues
    assert sweep.space[0].values == (8, 16, 24, 32)
    trials = trial_runs(sweep, BASE_RUN)
    assert len(trials) == 8
    params, run = trials[1]
    detail = detail_for(sweep, run, params)
    assert detail == {"detail": {"graph_quantize[0]": {"calibration": {"num_samples": 8}}}}
    config, run_issues = validate_run(run, get_device("raspberry_pi_5"))
    assert config is not None, run_issues
    assert validate_detail(detail, config)[0] is not None
    assert _codes("""
version: "1.0"
space: {graph_quantize.calibration.samples: [8], graph_quantize.amp.target_snr: {from: 40, to: 30, step: 1}}
objectives: [{snr: max}]
""") == {"S014": "space.graph_quantize.calibration.samples", "S012": "space.graph_quantize.amp.target_snr"}


def test_the_layers_strategy_needs_no_space_and_takes_counts() -> None:
    sweep, issues = validate_sweep(yaml.safe_load("""
version: "1.0"
objectives: [{latency: min}, {snr: max}]
strategy: {layers: {scheme: W8-A8, keep_float: [1, 3]}}
"""))
    assert sweep is not None, issues
    assert (sweep.strategy.name, sweep.strategy.keep, sweep.space) == ("layers", (1, 3), ())
    assert _codes("""
version: "1.0"
space: {graph_optimize: [true, false]}
objectives: [{snr: max}]
strategy: {layers: {keep_float: [0]}}
""") == {"S042": "strategy.layers", "S043": "space"}
