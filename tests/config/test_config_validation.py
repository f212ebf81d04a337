"""Every validation rule of run.yaml and run.detail.yaml, each with a bad file, through the real loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from np_optimizer.config import check_experiment_config
from np_optimizer.devices import get_device

GO_GQ = """version: "1.0"
steps:
- graph_optimize: null
- graph_quantize:
  - scheme: W8-A8
    automatic_mixed_precision: null
"""
PROFILE3 = GO_GQ + "profile:\n- INPUT_MODEL\n- GRAPH_OPTIMIZE\n- GRAPH_QUANTIZE\n"


def check(tmp_path: Path, run_yaml: str, detail: str | None = None, device: str = "raspberry_pi_5"):
    (tmp_path / "run.yaml").write_text(run_yaml)
    if detail is not None:
        (tmp_path / "run.detail.yaml").write_text(detail)
    return check_experiment_config(tmp_path / "run.yaml", get_device(device))


def codes(issues) -> list[str]:
    return [i.code for i in issues if not i.is_warning]


RUN_CASES = [
    # (id, run.yaml, device, expected code, expected location)
    ("not-a-mapping", "- a\n- b\n", "raspberry_pi_5", "Y002", "(file)"),
    ("no-version", GO_GQ.replace('version: "1.0"\n', ""), "raspberry_pi_5", "R001", "version"),
    ("bad-version", GO_GQ.replace('"1.0"', '"2.0"'), "raspberry_pi_5", "R002", "version"),
    ("no-steps", 'version: "1.0"\nprofile:\n- INPUT_MODEL\n', "raspberry_pi_5", "R010", "steps"),
    ("empty-steps", 'version: "1.0"\nsteps: []\n', "raspberry_pi_5", "R010", "steps"),
    ("step-not-single-key", 'version: "1.0"\nsteps:\n- graph_optimize: null\n  graph_quantize: null\n',
     "raspberry_pi_5", "R011", "steps[0]"),
    ("unknown-step", 'version: "1.0"\nsteps:\n- graph_optimise: null\n', "raspberry_pi_5", "R012", "steps[0]"),
    ("repeated-step", 'version: "1.0"\nsteps:\n- graph_optimize: null\n- graph_optimize: null\n',
     "raspberry_pi_5", "R013", "steps[1]"),
    ("wrong-order", 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n- graph_optimize: null\n',
     "raspberry_pi_5", "R014", "steps[1]"),
    ("go-with-params", 'version: "1.0"\nsteps:\n- graph_optimize:\n  - level: 3\n', "raspberry_pi_5", "R015",
     "steps[0].graph_optimize"),
    ("gq-two-configs", 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n  - scheme: W8-A8\n',
     "raspberry_pi_5", "R015", "steps[0].graph_quantize"),
    ("gq-unknown-param", GO_GQ.replace("    automatic_mixed_precision: null", "    schema: x"), "raspberry_pi_5",
     "R016", "steps[1].graph_quantize[0].schema"),
    ("aq-bad-algorithm", 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: AWQQ\n    scheme: W4-A8_dynamic\n',
     "raspberry_pi_5", "R020", "steps[0].advanced_quantize[0].algorithm"),
    ("aq-bad-scheme", 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: AWQ\n    scheme: W3\n',
     "raspberry_pi_5", "R021", "steps[0].advanced_quantize[0].scheme"),
    ("aq-on-npu", 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: RTN\n    scheme: W8-A8\n',
     "alif_e8", "R022", "steps[0].advanced_quantize"),
    ("gq-bad-scheme", GO_GQ.replace("scheme: W8-A8", "scheme: W9-A9"), "raspberry_pi_5", "R030",
     "steps[1].graph_quantize[0].scheme"),
    ("gq-a16-on-xnnpack", GO_GQ.replace("scheme: W8-A8", "scheme: W8-A16"), "raspberry_pi_5", "R031",
     "steps[1].graph_quantize[0].scheme"),
    ("gq-w4-on-ethos", GO_GQ.replace("scheme: W8-A8", "scheme: W4-A8_dynamic"), "alif_e8", "R031",
     "steps[1].graph_quantize[0].scheme"),
    ("gq-bad-amp", GO_GQ.replace("automatic_mixed_precision: null", "automatic_mixed_precision: FAST"),
     "raspberry_pi_5", "R032", "steps[1].graph_quantize[0].automatic_mixed_precision"),
    ("profile-not-list", GO_GQ + "profile: INPUT_MODEL\n", "raspberry_pi_5", "R040", "profile"),
    ("profile-unknown-name", GO_GQ + "profile:\n- INPUT_MODEL\n- GRAPH_OPTIMISE\n", "raspberry_pi_5", "R041",
     "profile[1]"),
    ("profile-step-absent", GO_GQ + "profile:\n- ADVANCED_QUANTIZE\n", "raspberry_pi_5", "R042", "profile[0]"),
    ("profile-duplicate", GO_GQ + "profile:\n- GRAPH_QUANTIZE\n- graph_quantize\n", "raspberry_pi_5", "R043",
     "profile[1]"),
    ("profile-output-alias-duplicate", GO_GQ + "profile:\n- GRAPH_QUANTIZE\n- OUTPUT_MODEL\n", "raspberry_pi_5",
     "R043", "profile[1]"),
    ("evaluate-not-list", GO_GQ + "evaluate: SNR\n", "raspberry_pi_5", "R050", "evaluate"),
    ("evaluate-bad-model", GO_GQ + "evaluate:\n- model: GRAPH_QUANTISE\n", "raspberry_pi_5", "R051",
     "evaluate[0].model"),
    ("evaluate-bad-metric", GO_GQ + "evaluate:\n- model: GRAPH_QUANTIZE\n  metrics: [SNR, PSNRR]\n",
     "raspberry_pi_5", "R052", "evaluate[0].metrics"),
    ("unknown-top-level", GO_GQ + "profiles:\n- INPUT_MODEL\n", "raspberry_pi_5", "R090", "profiles"),
    # YAML the safe loader refuses for reasons other than syntax, and hostile YAML (issue 11): one issue each
    ("python-tag", 'version: !!python/object/apply:os.system ["true"]\n', "raspberry_pi_5", "Y004", "(file)"),
    ("custom-tag", GO_GQ.replace('"1.0"', '!version "1.0"'), "raspberry_pi_5", "Y004", "(file)"),
    ("list-as-key", GO_GQ + "? [a, b]\n: 1\n", "raspberry_pi_5", "Y004", "(file)"),
    ("number-as-key", GO_GQ + "1: x\n", "raspberry_pi_5", "Y004", "(file)"),
    ("key-given-twice", GO_GQ + "steps:\n- graph_optimize: null\n", "raspberry_pi_5", "Y004", "(file)"),
    ("alias-inside-itself", 'version: "1.0"\nsteps: &s\n- *s\n', "raspberry_pi_5", "Y004", "(file)"),
    ("nested-too-deep", 'version: "1.0"\nsteps: ' + "[" * 5000 + "]" * 5000 + "\n", "raspberry_pi_5", "Y005",
     "(file)"),
    ("alias-expansion", 'version: "1.0"\na: &a [x, x, x, x, x, x, x, x, x, x]\n'
     + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
     "raspberry_pi_5", "Y005", "(file)"),
]


@pytest.mark.parametrize(("run_yaml", "device", "code", "location"), [c[1:] for c in RUN_CASES],
                         ids=[c[0] for c in RUN_CASES])
def test_run_yaml_rule(tmp_path: Path, run_yaml: str, device: str, code: str, location: str) -> None:
    config, issues = check(tmp_path, run_yaml, device=device)
    assert config is None
    found = [i for i in issues if i.code == code]
    assert found, f"expected {code}, got {[(i.code, i.location, i.message) for i in issues]}"
    assert found[0].location == location
    assert found[0].message and found[0].hint and found[0].level


def test_yaml_syntax_error_gives_file_line_and_column(tmp_path: Path) -> None:
    config, issues = check(tmp_path, 'version: "1.0"\nsteps:\n- graph_optimize: null\n  bad: [unclosed\n')
    assert config is None and issues[0].code == "Y001"
    assert issues[0].file == "run.yaml" and issues[0].line == 5 and issues[0].column is not None
    assert "line 5" in issues[0].message


def test_unknown_checkpoint_hint_suggests_the_close_name(tmp_path: Path) -> None:
    _, issues = check(tmp_path, GO_GQ + "profile:\n- GRAPH_OPTIMISE\n")
    assert "Did you mean 'GRAPH_OPTIMIZE'" in issues[0].hint


def test_issue_points_at_its_line(tmp_path: Path) -> None:
    _, issues = check(tmp_path, GO_GQ + "profile:\n- INPUT_MODEL\n- NOPE\n")
    assert issues[0].line == 9


def test_checkpoint_names_are_case_insensitive(tmp_path: Path) -> None:
    config, issues = check(tmp_path, GO_GQ + "profile:\n- input_model\n- Graph_Optimize\n- output_model\n")
    assert config is not None and codes(issues) == []
    assert config.run.profile == ("INPUT_MODEL", "GRAPH_OPTIMIZE", "OUTPUT_MODEL")
    assert [c for _, c in config.run.resolved_profile()] == ["INPUT_MODEL", "GRAPH_OPTIMIZE", "GRAPH_QUANTIZE"]


def test_empty_profile_section_is_a_warning_only(tmp_path: Path) -> None:
    config, issues = check(tmp_path, GO_GQ + "profile:\n")
    assert config is not None and config.run.profile is None
    assert [i.code for i in issues if i.is_warning] == ["R044"]


def test_no_profile_section_means_no_profiling(tmp_path: Path) -> None:
    config, _ = check(tmp_path, GO_GQ)
    assert config is not None and config.run.profile is None


def test_aq_is_refused_at_validation_when_unavailable(tmp_path: Path) -> None:
    from np_optimizer.config.availability import aq_unavailable_reason

    run = 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: RTN\n    scheme: W8-A8\n'
    config, issues = check(tmp_path, run)
    if aq_unavailable_reason("RTN", "W8-A8") is None:
        assert config is not None
    else:
        assert "R023" in codes(issues)


DETAIL_CASES = [
    ("not-under-detail", "profile[0]:\n  num_executions: 3\n", "D001", "(file)"),
    ("detail-not-mapping", "detail: [1, 2]\n", "D002", "detail"),
    ("unknown-key", "detail:\n  profle[0]:\n    num_executions: 3\n", "D010", "detail.profle[0]"),
    ("bad-global", "detail:\n  gpu_device: cuda:0\n", "D011", "detail.gpu_device"),
    ("batch-size-is-not-read", "detail:\n  batch_size: 4\n", "D012", "detail.batch_size"),
    ("profile-index-out-of-range", "detail:\n  profile[3]:\n    num_executions: 3\n", "D020", "detail.profile[3]"),
    ("num-executions-zero", "detail:\n  profile[0]:\n    num_executions: 0\n", "D021",
     "detail.profile[0].num_executions"),
    ("num-executions-float", "detail:\n  profile[1]:\n    num_executions: 2.5\n", "D021",
     "detail.profile[1].num_executions"),
    ("num-executions-text", "detail:\n  profile[1]:\n    num_executions: ten\n", "D021",
     "detail.profile[1].num_executions"),
    ("timeout-negative", "detail:\n  profile[2]:\n    timeout: -1\n", "D021", "detail.profile[2].timeout"),
    ("timeout-zero", "detail:\n  profile[2]:\n    timeout: 0\n", "D021", "detail.profile[2].timeout"),
    ("timeout-text", "detail:\n  profile[2]:\n    timeout: soon\n", "D021", "detail.profile[2].timeout"),
    ("unknown-profile-option", "detail:\n  profile[0]:\n    num_execution: 3\n", "D023",
     "detail.profile[0].num_execution"),
    ("step-not-in-run", "detail:\n  advanced_quantize[0]:\n    parameters:\n      clip: false\n", "D030",
     "detail.advanced_quantize[0]"),
    ("step-index-not-zero", "detail:\n  graph_quantize[1]:\n    calibration:\n      num_samples: 8\n", "D031",
     "detail.graph_quantize[1]"),
    ("bad-step-value", "detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 0\n", "D032",
     "detail.graph_quantize[0].calibration.num_samples"),
    ("unknown-step-option", "detail:\n  graph_optimize[0]:\n    tolerence: 0.1\n", "D033",
     "detail.graph_optimize[0].tolerence"),
    # non-finite and absurd numbers (issue 11): rejected with location and hint, never run with
    ("timeout-nan", "detail:\n  profile[0]:\n    timeout: .nan\n", "D021", "detail.profile[0].timeout"),
    ("timeout-inf", "detail:\n  profile[1]:\n    timeout: .inf\n", "D021", "detail.profile[1].timeout"),
    ("timeout-overflows-to-inf", "detail:\n  profile[1]:\n    timeout: 1.0e+400\n", "D021",
     "detail.profile[1].timeout"),
    ("timeout-huge", "detail:\n  profile[2]:\n    timeout: 1.0e+300\n", "D021", "detail.profile[2].timeout"),
    ("num-executions-huge", "detail:\n  profile[0]:\n    num_executions: 100000000000000000000\n", "D021",
     "detail.profile[0].num_executions"),
    ("seed-huge", "detail:\n  seed: 100000000000000000000\n", "D011", "detail.seed"),
    ("step-option-nan", "detail:\n  graph_optimize[0]:\n    tolerance: .nan\n", "D032",
     "detail.graph_optimize[0].tolerance"),
    ("detail-python-tag", "detail: !!python/object/new:dict {}\n", "Y004", "(file)"),
]


@pytest.mark.parametrize(("detail", "code", "location"), [c[1:] for c in DETAIL_CASES], ids=[c[0] for c in DETAIL_CASES])
def test_detail_rule(tmp_path: Path, detail: str, code: str, location: str) -> None:
    config, issues = check(tmp_path, PROFILE3, detail)
    assert config is None
    found = [i for i in issues if i.code == code]
    assert found, f"expected {code}, got {[(i.code, i.location) for i in issues]}"
    assert found[0].location == location and found[0].hint
    assert found[0].file == "run.detail.yaml"


def test_unknown_profile_option_hint_names_the_right_key(tmp_path: Path) -> None:
    _, issues = check(tmp_path, PROFILE3, "detail:\n  profile[0]:\n    num_execution: 3\n")
    assert "num_executions" in issues[0].hint


def test_detail_syntax_error_gives_line(tmp_path: Path) -> None:
    config, issues = check(tmp_path, PROFILE3, "detail:\n  profile[0]: {num_executions: 3\n")
    assert config is None and issues[0].code == "Y001" and issues[0].file == "run.detail.yaml" and issues[0].line


def test_profile_options_reach_the_nth_entry(tmp_path: Path) -> None:
    detail = "detail:\n  profile[1]:\n    num_executions: 7\n    timeout: 2.5\n"
    config, issues = check(tmp_path, PROFILE3, detail)
    assert config is not None, issues
    assert config.detail.profile_options(0) == {"num_executions": 30, "timeout": 60, "warmup": 3,
                                                "num_layer_executions": 10, "time_limit": 600}
    assert config.detail.profile_options(1) == {"num_executions": 7, "timeout": 2.5, "warmup": 3,
                                                "num_layer_executions": 10, "time_limit": 600}
    assert config.detail.profile_options(2)["num_executions"] == 30


def test_aq_on_an_exported_program_project_is_refused_at_validation(tmp_path: Path) -> None:
    run = 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: RTN\n    scheme: W8-A8\n'
    (tmp_path / "run.yaml").write_text(run)
    config, issues = check_experiment_config(tmp_path / "run.yaml", get_device("raspberry_pi_5"),
                                             model={"kind": "pt2", "file": "model/model.pt2"})
    assert config is None and [i.code for i in issues] == ["R024"]
    assert issues[0].location == "steps[0].advanced_quantize" and "exported program" in issues[0].message


def test_aq_defaults_follow_the_scheme(tmp_path: Path) -> None:
    base = 'version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: RTN\n    scheme: {}\n'
    expected = {"W8-A8": ("CHANNEL", "TENSOR"), "W8-A8_dynamic": ("CHANNEL", "TOKEN"), "W4-A8_dynamic": ("GROUP", "TOKEN")}
    for scheme, (weight, activation) in expected.items():
        config, _ = check(tmp_path, base.format(scheme))
        options = config.detail.step_options("advanced_quantize")
        assert (options["weight"]["granularity"], options["activation"]["granularity"]) == (weight, activation)
    config, _ = check(tmp_path, base.format("W8-A8"),
                      "detail:\n  advanced_quantize[0]:\n    weight:\n      granularity: GROUP\n")
    assert config.detail.step_options("advanced_quantize")["weight"]["granularity"] == "GROUP"  # the user's value wins


def test_batch_size_is_refused_with_what_to_do(tmp_path: Path) -> None:
    config, issues = check(tmp_path, PROFILE3, "detail:\n  batch_size: 1\n  seed: 0\n")
    assert config is None and codes(issues) == ["D012"]
    assert issues[0].hint == "Remove it: np uses the batch size of the model's example input."
    assert issues[0].line == 2  # placed in the file
    (tmp_path / "run.detail.yaml").unlink()
    config, issues = check(tmp_path, PROFILE3, None)
    assert config is not None and "batch_size" not in config.detail.globals  # never written by np any more


def test_non_finite_timeouts_say_where_and_what(tmp_path: Path) -> None:
    _, issues = check(tmp_path, PROFILE3, "detail:\n  profile[0]:\n    timeout: .nan\n")
    assert issues[0].message == "detail.profile[0].timeout must be a finite number (got nan)."
    assert issues[0].line == 3 and "Seconds of measurement" in issues[0].hint


def test_yaml_off_for_a_nullable_choice_says_to_write_null(tmp_path: Path) -> None:
    run = 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile: [GRAPH_QUANTIZE]\n'
    _, issues = check(tmp_path, run, "detail:\n  graph_quantize[0]:\n    embedding:\n      bits: off\n")
    assert issues[0].message == ("detail.graph_quantize[0].embedding.bits must be one of 8, 4 or null (YAML reads off, "
                                 "no and false as false: write null) (got false).")
    assert issues[0].line == 4 and issues[0].hint.endswith("Default: 8.")
    _, issues = check(tmp_path, run, "detail:\n  graph_quantize[0]:\n    embedding:\n      bits: 16\n")
    assert issues[0].message == "detail.graph_quantize[0].embedding.bits must be one of 8, 4 or null (got 16)."


def test_alias_expansion_is_refused_quickly(tmp_path: Path) -> None:
    import time

    laughs = 'version: "1.0"\na: &a [x, x, x, x, x, x, x, x, x, x]\n' + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefghijklmnopqrstuvwxy", "bcdefghijklmnopqrstuvwxyz"))
    assert len(laughs) < 2000  # 10**26 values once expanded
    started = time.perf_counter()
    config, issues = check(tmp_path, laughs)
    assert time.perf_counter() - started < 5
    assert config is None and codes(issues) == ["Y005"] and issues[0].line is not None


def test_a_few_aliases_still_read(tmp_path: Path) -> None:
    run = GO_GQ + "profile: &p\n- INPUT_MODEL\n"
    config, issues = check(tmp_path, run, "detail:\n  profile[0]: &o\n    num_executions: 5\n")
    assert config is not None, issues
