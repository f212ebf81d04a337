"""Workspace, projects, experiments and directory discovery, through the real `np` entry point."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from np_optimizer.errors import EXIT_CONFIG, EXIT_USAGE, EXIT_VALIDATION


def test_workspace_init_creates_ready_samples(run_np, tmp_path: Path) -> None:
    result = run_np("workspace", "init", str(tmp_path / "ws"), "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json["projects"] == ["sample_cpu", "sample_npu", "sample_llm", "sample_digits"]
    for name, device in (("sample_cpu", "raspberry_pi_5"), ("sample_npu", "alif_e8")):
        run = yaml.safe_load((tmp_path / "ws" / name / "experiment_01" / "run.yaml").read_text())
        assert [next(iter(s)) for s in run["steps"]] == ["graph_optimize", "graph_quantize"]
        assert run["steps"][1]["graph_quantize"][0] == {"scheme": "W8-A8", "automatic_mixed_precision": None}
        assert run["profile"] == ["INPUT_MODEL", "GRAPH_OPTIMIZE", "GRAPH_QUANTIZE"]
        info = run_np("projects", "info", name, "--json", cwd=tmp_path / "ws").json
        assert info["device"] == device
    again = run_np("workspace", "init", str(tmp_path / "ws"), "--json")
    assert again.json["skipped"] == ["sample_cpu", "sample_npu", "sample_llm", "sample_digits"]
    assert again.json["projects"] == []


def test_samples_validate_and_dry_run(run_np, workspace: Path) -> None:
    for name, backend in (("sample_cpu", "xnnpack"), ("sample_npu", "ethos-u")):
        exp = workspace / name / "experiment_01"
        assert run_np("validate", cwd=exp).exit_code == 0
        result = run_np("run", "--dry-run", cwd=exp)
        assert result.exit_code == 0, result.stderr
        assert "Profile: INPUT_MODEL, GRAPH_OPTIMIZE, GRAPH_QUANTIZE" in result.stdout
        assert f"/ executorch / {backend}" in result.stdout
    llm = run_np("run", "--dry-run", cwd=workspace / "sample_llm" / "experiment_01")
    assert llm.exit_code == 0, llm.stdout + llm.stderr
    assert "advanced_quantize (algorithm=AWQ, scheme=W4-A8_dynamic)" in llm.stdout
    assert "Profile: INPUT_MODEL, ADVANCED_QUANTIZE, GRAPH_OPTIMIZE, GRAPH_QUANTIZE" in llm.stdout
    npu = run_np("run", "--dry-run", "--json", cwd=workspace / "sample_npu" / "experiment_01").json
    assert all(p["metrics"] == ["LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "MACS", "PARAMS"]
               for p in npu["plan"]["profile"])
    cpu = run_np("run", "--dry-run", "--json", cwd=workspace / "sample_cpu" / "experiment_01").json
    assert all(p["metrics"] == ["MACS", "PARAMS"] and "LATENCY" in p["missing"] for p in cpu["plan"]["profile"])


def test_plan_shows_the_evaluation_phase(run_np, cpu_experiment: Path, npu_experiment: Path) -> None:
    run_file = cpu_experiment / "run.yaml"
    run_file.write_text(run_file.read_text() + "evaluate:\n- model: GRAPH_QUANTIZE\n  metrics: [SNR, TOP1_ACCURACY]\n")
    for args in (["run", "--dry-run"], ["validate"]):
        result = run_np(*args, cwd=cpu_experiment)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert "Evaluate: GRAPH_QUANTIZE (SNR,TOP1_ACCURACY)" in result.stdout
        assert "Evaluation phase after the steps, on the .pte on this machine's ExecuTorch runtime (xnnpack); 8 " \
               "evaluation inputs (no labels)" in result.stdout
        assert "TOP1/TOP5 accuracy need a labelled dataset" in result.stdout  # sample_cpu has none
    data = run_np("validate", "--json", cwd=cpu_experiment).json
    assert "8 evaluation inputs" in data["plan"]["evaluate_on"]
    run_file.write_text(run_file.read_text().split("evaluate:")[0])
    assert run_np("validate", "--json", cwd=cpu_experiment).json["notes"] == []
    npu_run = npu_experiment / "run.yaml"
    npu_run.write_text(npu_run.read_text() + "evaluate:\n- GRAPH_QUANTIZE\n")
    npu = run_np("run", "--dry-run", cwd=npu_experiment)
    assert "on the exported program (a ethos-u .pte cannot run here; NPU int8 arithmetic may differ slightly)" in \
        " ".join(npu.stdout.split())
    digits = run_np("run", "--dry-run", cwd=cpu_experiment.parent.parent / "sample_digits" / "experiment_01")
    assert "dataset digits_val (360 labelled samples, tensors)" in digits.stdout


def test_validation_violations_exit_5_and_print_a_table(run_np, cpu_experiment: Path) -> None:
    run_file = cpu_experiment / "run.yaml"
    run_file.write_text(run_file.read_text().replace("- GRAPH_OPTIMIZE ", "- GRAPH_OPTIMISE "))
    result = run_np("validate", cwd=cpu_experiment)
    assert result.exit_code == EXIT_VALIDATION
    assert "Violations" in result.stdout and "R041" in result.stdout and "GRAPH_OPTIMIZE" in result.stdout
    dry = run_np("run", "--dry-run", "--json", cwd=cpu_experiment)
    assert dry.exit_code == EXIT_VALIDATION and dry.json["is_valid"] is False
    assert dry.json["issues"][0]["location"] == "profile[1]"


@pytest.mark.parametrize("form", ["builtin", "pt2", "factory"])
def test_projects_create_model_forms(run_np, workspace: Path, tmp_path: Path, form: str) -> None:
    import torch

    from np_optimizer.models.source import ModelSpec, load_model
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.records import from_dict

    model, inputs = build_builtin("mlp")
    if form == "builtin":
        arg = "mlp"
    elif form == "pt2":
        arg = str(tmp_path / "mlp.pt2")
        torch.export.save(torch.export.export(model, inputs), arg)
    else:
        source = tmp_path / "my_model.py"
        source.write_text("import torch\n\ndef build():\n    return torch.nn.Linear(8, 2).eval(), (torch.randn(1, 8),)\n")
        arg = f"{source}:build"
    result = run_np("projects", "create", "--name", f"p_{form}", "--model", arg, "--device", "host", "--json",
                    cwd=workspace)
    assert result.exit_code == 0, result.stdout + result.stderr
    project_dir = workspace / f"p_{form}"
    spec = from_dict(ModelSpec, result.json["model"])
    assert spec.kind == {"factory": "package"}.get(form, form)  # file.py:factory copies the file's folder
    if form != "builtin":
        assert (project_dir / spec.file).is_file()  # the model is copied into the project
        Path(arg.rpartition(":")[0] if form == "factory" else arg).unlink()  # the project no longer needs the source
    loaded = load_model(spec, project_dir)
    expected_shape = (1, 8) if form == "factory" else (1, 64)
    assert tuple(loaded.example_inputs[0].shape) == expected_shape


@pytest.mark.parametrize(("model_arg", "code", "exit_code"), [
    ("no_such_model", "NP-MDL-404", EXIT_CONFIG),
    ("missing.pt2", "NP-MDL-404", EXIT_CONFIG),
    ("missing.py:build", "NP-MDL-404", EXIT_CONFIG),
])
def test_projects_create_bad_model(run_np, workspace: Path, model_arg: str, code: str, exit_code: int) -> None:
    result = run_np("projects", "create", "--name", "bad", "--model", model_arg, "--device", "host", "--json",
                    cwd=workspace)
    assert result.exit_code == exit_code
    assert result.json["code"] == code and result.json["hint"]
    assert not (workspace / "bad").exists()  # a failed create leaves nothing behind


def test_factory_must_exist_in_file(run_np, workspace: Path, tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def other():\n    pass\n")
    result = run_np("projects", "create", "--name", "badf", "--model", f"{source}:build", "--device", "host",
                    cwd=workspace)
    assert result.exit_code == EXIT_CONFIG and "defines no top-level 'build'" in result.stderr


def test_projects_create_checks_device_runtime_backend(run_np, workspace: Path) -> None:
    unknown = run_np("projects", "create", "--name", "xx1", "--model", "mlp", "--device", "raspbery_pi_5", "--json",
                     cwd=workspace)
    assert unknown.exit_code == EXIT_CONFIG and "raspberry_pi_5" in unknown.json["hint"]
    mismatch = run_np("projects", "create", "--name", "xx2", "--model", "mlp", "--device", "alif_e8", "--backend",
                      "xnnpack", "--json", cwd=workspace)
    assert mismatch.exit_code == EXIT_CONFIG and mismatch.json["code"] == "NP-DEV-422"
    bad_name = run_np("projects", "create", "--name", "x", "--model", "mlp", "--device", "host", cwd=workspace)
    assert bad_name.exit_code == EXIT_USAGE


def test_calibration_dataset_is_copied(run_np, workspace: Path, tmp_path: Path) -> None:
    import numpy as np

    data = tmp_path / "calib"
    data.mkdir()
    for i in range(3):
        np.save(data / f"{i}.npy", np.zeros((1, 64), dtype=np.float32))
    result = run_np("projects", "create", "--name", "with_data", "--model", "mlp", "--device", "host",
                    "--calibration-dataset", str(data), "--json", cwd=workspace)
    assert result.exit_code == 0, result.stderr
    assert len(list((workspace / "with_data" / "data" / "calibration").glob("*.npy"))) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = run_np("projects", "create", "--name", "no_data", "--model", "mlp", "--device", "host",
                 "--calibration-dataset", str(empty), cwd=workspace)
    assert bad.exit_code == EXIT_CONFIG and "holds no .npy" in bad.stderr


def test_experiments_create_detail_ls_info(run_np, workspace: Path) -> None:
    project = workspace / "sample_cpu"
    created = run_np("experiments", "create", "--steps", "gq", "--json", cwd=project)
    assert created.exit_code == 0 and created.json["name"] == "experiment_02"
    assert created.json["profile"] == ["INPUT_MODEL", "GRAPH_QUANTIZE"]
    exp = project / "experiment_02"
    detail = run_np("experiments", "detail", cwd=exp)
    assert detail.exit_code == 0
    text = (exp / "run.detail.yaml").read_text()
    assert "profile[0]:   # INPUT_MODEL" in text and "profile[1]:   # GRAPH_QUANTIZE" in text
    data = yaml.safe_load(text)["detail"]
    assert data["profile[1]"] == {
        "num_executions": 30,
        "num_layer_executions": 10,
        "time_limit": 600,
        "timeout": 60,
        "warmup": 3,
    }
    assert data["graph_quantize[0]"]["calibration"]["num_samples"] == 32
    # a user's value survives a second `detail`
    (exp / "run.detail.yaml").write_text(text.replace("num_executions: 30", "num_executions: 5", 1))
    run_np("experiments", "detail", cwd=exp)
    assert yaml.safe_load((exp / "run.detail.yaml").read_text())["detail"]["profile[0]"]["num_executions"] == 5
    listed = run_np("experiments", "ls", "--json", cwd=project).json
    assert [e["name"] for e in listed] == ["experiment_01", "experiment_02"]
    bad = run_np("experiments", "create", "--steps", "gq,go", cwd=project)
    assert bad.exit_code == EXIT_USAGE and all(c in bad.stderr for c in ("go,gq", "aq,go,gq"))
    for steps, profile in (("aq,go,gq", 4), ("go", 2)):
        result = run_np("experiments", "create", "--steps", steps, "--json", cwd=project)
        written = yaml.safe_load((Path(result.json["path"]) / "run.yaml").read_text())
        assert len(written["profile"]) == profile and len(written["steps"]) == len(steps.split(","))


def test_directory_discovery(run_np, workspace: Path) -> None:
    exp = workspace / "sample_cpu" / "experiment_01"
    deep = exp / "logs" / "nested"
    deep.mkdir(parents=True)
    assert run_np("validate", cwd=deep).exit_code == 0  # the nearest folder holding run.yaml
    assert run_np("validate", "-e", "experiment_01", "--project", "sample_cpu", cwd=workspace).exit_code == 0
    assert run_np("validate", "-e", str(exp), cwd=workspace.parent).exit_code == 0
    assert run_np("validate", "-e", "experiment_01", cwd=workspace / "sample_npu").exit_code == 0
    (workspace / "sample_cpu" / "notes").mkdir()
    assert run_np("experiments", "ls", cwd=workspace / "sample_cpu" / "notes").exit_code == 0  # project from cwd
    outside = run_np("validate", "--json", cwd=workspace)
    assert outside.exit_code == EXIT_CONFIG
    assert outside.json == {"error": True, "code": "NP-EXP-404", "message": outside.json["message"],
                            "hint": outside.json["hint"], "exit_code": EXIT_CONFIG}
    missing = run_np("validate", "-e", "nope", "--project", "sample_cpu", cwd=workspace)
    assert missing.exit_code == EXIT_CONFIG and "experiment_01" in missing.stderr
    no_ws = run_np("projects", "ls", cwd=workspace.parent)
    assert no_ws.exit_code == EXIT_CONFIG and "np workspace init" in no_ws.stderr


def test_devices_ls_filters_and_formats(run_np, tmp_path: Path) -> None:
    rows = run_np("devices", "ls", "--json", cwd=tmp_path).json
    names = {r["device"] for r in rows}
    assert {"raspberry_pi_5", "aws_graviton4", "vivo_x300_pro", "host", "alif_e8", "corstone_300"} <= names
    ethos = run_np("devices", "ls", "--filter", "backend=ethos-u", "--json", cwd=tmp_path).json
    assert {r["mlia_target"] for r in ethos} == {"ethos-u85-256", "ethos-u55-128"}
    plain = run_np("devices", "ls", "--plain", "--filter", "device=host", cwd=tmp_path).stdout.splitlines()
    assert plain[0].split("\t")[:3] == ["device", "runtime", "backend"] and plain[1].startswith("host\t")
    assert run_np("devices", "ls", "--filter", "colour=red", cwd=tmp_path).exit_code == EXIT_USAGE


def test_projects_ls_lists_the_others_when_one_project_json_is_damaged(workspace: Path, run_np) -> None:
    (workspace / "sample_npu" / "project.json").write_text("{truncated")
    result = run_np("projects", "ls", "--json", cwd=workspace)
    assert result.exit_code == 0, result.stderr
    assert {p["name"] for p in result.json} >= {"sample_cpu", "sample_llm"}
    assert "sample_npu" in result.stderr and "left out" in result.stderr
    assert (workspace / "sample_npu" / "project.json").read_text() == "{truncated"  # a read never rewrites it
