"""Accuracy on real labelled data: a small CNN trained here on scikit-learn's 8x8 digits (seeded, a few seconds),
saved as a project model, with the held-out split as an image folder of PNGs; `np run` with GO + GQ W8-A8 and
`evaluate:` TOP1. np's TOP1 is checked against an independent loop over the .pte on the ExecuTorch runtime that reads
the PNGs itself. Figures seen (seed 0, 360 validation images): float 0.9806, int8 W8-A8 0.9833 (see the README)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.helpers import ET_VERSION, assert_unchanged, copy_workspace, tree_digest

pytestmark = pytest.mark.np_run

RUN_YAML = """version: "1.0"
steps:
- graph_optimize: null
- graph_quantize:
  - scheme: W8-A8
    automatic_mixed_precision: null
evaluate:
- model: INPUT_MODEL
  metrics: [TOP1_ACCURACY]
- model: GRAPH_QUANTIZE
  metrics: [TOP1_ACCURACY, TOP5_ACCURACY, SNR, KLD]
"""


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory: pytest.TempPathFactory, module_cache: Path):
    from np_optimizer import api
    from np_optimizer.cli.main import main
    from np_optimizer.models.digits import accuracy, load_split, train_digits_cnn

    root = tmp_path_factory.mktemp("digits")
    split = load_split(seed=0)
    model = train_digits_cnn(split, seed=0)
    float_eager = accuracy(model, split.val_x, split.val_y)
    assert float_eager >= 0.95, float_eager
    torch.export.save(torch.export.export(model, (split.val_x[:1],)), root / "digits.pt2")
    val = root / "digits_val"
    for index, (image, label) in enumerate(zip(split.val_u8, split.val_y.tolist())):
        (val / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(val / str(label) / f"{index:04d}.png")
    calibration = root / "calibration"
    calibration.mkdir()
    for index in range(64):
        np.save(calibration / f"{index:03d}.npy", split.train_x[index].numpy())
    ws = root / "ws"
    ws.mkdir()
    (ws / "np-workspace.json").write_text("{}")
    api.projects_create(name="digits", model=str(root / "digits.pt2"), device="raspberry_pi_5", cwd=ws,
                        calibration_dataset=str(calibration), evaluation_dataset=str(val))
    exp = Path(api.experiments_create(steps="go,gq", project="digits", cwd=ws).path)
    (exp / "run.yaml").write_text(RUN_YAML)
    import os

    cwd = Path.cwd()
    os.chdir(exp)
    try:
        code = main(["run"])
    finally:
        os.chdir(cwd)
    assert code == 0, (exp / "logs" / "execution.log").read_text()[-3000:]
    digest = tree_digest(exp)
    yield exp, val, float_eager
    assert_unchanged(exp, digest)


def _top1(exp: Path, job: str) -> dict:
    data = json.loads((exp / job / "job.json").read_text())
    (result,) = [e for e in data["evaluation"] if e["trigger"] == "RUN_INLINE"]
    return result


def _independent_top1(pte: Path, folder: Path) -> float:
    """The .pte on the ExecuTorch runtime over the PNG files, read here with Pillow (none of np's dataset code)."""
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    right = total = 0
    for label_dir in sorted(folder.iterdir()):
        for png in sorted(label_dir.glob("*.png")):
            pixels = np.asarray(Image.open(png), dtype=np.float32) / 255.0
            scores = method.execute([torch.from_numpy(pixels).reshape(1, 1, 8, 8)])[0]
            right += int(int(scores.argmax()) == int(label_dir.name))
            total += 1
    assert total == 360
    return right / total


def test_top1_float_int8_and_an_independent_runtime_loop(digits_run) -> None:
    exp, val, float_eager = digits_run
    float_result, int8_result = _top1(exp, "00_input_model"), _top1(exp, "02_graph_quantize")
    for result in (float_result, int8_result):
        assert result["status"] == "SUCCESS" and result["samples"] == 360
        assert result["evaluated_on"].startswith(f"the .pte on this machine's ExecuTorch {ET_VERSION} runtime")
        assert result["dataset"]["name"] == "digits_val" and result["dataset"]["format"] == "image_folder"
    top1 = {r["checkpoint"]: next(m["value"] for m in r["metrics"] if m["metric_type"] == "TOP1_ACCURACY")
            for r in (float_result, int8_result)}
    assert top1["INPUT_MODEL"] >= 0.95
    assert top1["INPUT_MODEL"] == pytest.approx(float_eager, abs=1 / 360)  # the fp32 .pte agrees with eager
    assert abs(top1["GRAPH_QUANTIZE"] - top1["INPUT_MODEL"]) <= 0.02, top1
    for job, checkpoint in (("00_input_model", "INPUT_MODEL"), ("02_graph_quantize", "GRAPH_QUANTIZE")):
        pte = next((exp / job / "artifacts").glob("compiled_*/model.pte"))
        assert top1[checkpoint] == pytest.approx(_independent_top1(pte, val), abs=1e-9), checkpoint
    int8 = {m["metric_type"]: m for m in int8_result["metrics"]}
    assert set(int8) == {"TOP1_ACCURACY", "TOP5_ACCURACY", "SNR", "KLD"}
    assert int8["TOP5_ACCURACY"]["value"] >= int8["TOP1_ACCURACY"]["value"]
    assert 15 < int8["SNR"]["value"] < 60 and int8["KLD"]["unit"] == "nats"
    assert "360 samples of digits_val" in int8["TOP1_ACCURACY"]["source"]
    log = (exp / "logs" / "execution.log").read_text()
    assert "[Phase 4] Evaluation" in log and "[Evaluator] Evaluating: graph_quantize on the .pte (360 samples" in log
    report = json.loads((exp / "report.json").read_text())
    assert {r["checkpoint"] for r in report["evaluation"]["results"]} == {"INPUT_MODEL", "GRAPH_QUANTIZE"}


def test_report_columns_sort_filter_and_best_model(run_np, digits_run) -> None:
    exp, _val, _ = digits_run
    table = run_np("report", "--plain", cwd=exp)
    assert table.exit_code == 0, table.stderr
    pipeline = table.stdout.split("section:pipeline")[1].split("section:")[0].strip().splitlines()
    header = pipeline[0].split("\t")
    rows = {line.split("\t")[0]: dict(zip(header, line.split("\t"))) for line in pipeline[1:]}
    assert float(rows["input_model"]["top1_accuracy"]) >= 0.95
    assert rows["01_graph_optimize"]["top1_accuracy"] == ""  # not listed under evaluate:
    by_top1 = run_np("report", "--sort", "top1", "--json", cwd=exp)
    assert by_top1.exit_code == 0
    shown = run_np("report", "--sort", "top1:asc", "--filter", "top1>=0.9", "--plain", cwd=exp).stdout
    kept = [line.split("\t")[0] for line in shown.split("section:pipeline")[1].split("section:")[0].strip()
            .splitlines()[1:]]
    assert set(kept) == {"input_model", "02_graph_quantize"}  # 01_graph_optimize has no accuracy: filtered out
    values = [float(rows[name]["top1_accuracy"]) for name in kept]
    assert values == sorted(values)
    text = run_np("report", cwd=exp).stdout
    assert "Top1" in text and "360 samples of digits_val" in " ".join(text.split())
    assert "Best model (lowest latency, then highest Top1 accuracy, then highest SNR): 02_graph_quantize" in \
        " ".join(text.split())
    project = run_np("report", "--project", "digits", "--plain", cwd=exp.parent.parent)
    lines = project.stdout.split("section:experiments")[1].strip().splitlines()
    head, output = lines[0].split("\t"), dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
    assert project.exit_code == 0 and "top1_accuracy" in head
    assert float(output["top1_accuracy"]) == pytest.approx(float(rows["02_graph_quantize"]["top1_accuracy"]))
    bad = run_np("report", "--filter", "top1>=x", cwd=exp)
    assert bad.exit_code == 2 and "top1" in bad.stderr + bad.stdout


def test_post_hoc_evaluate_is_recorded_in_its_own_table(run_np, digits_run, tmp_path: Path) -> None:
    exp = copy_workspace(digits_run[0], tmp_path)
    result = run_np("evaluate", "graph_optimize", "--metric", "top1", "--metric", "MSE", "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    (record,) = result.json["results"]
    assert record["trigger"] == "POSTHOC" and record["checkpoint"] == "GRAPH_OPTIMIZE" and record["samples"] == 360
    assert [m["metric_type"] for m in record["metrics"]] == ["TOP1_ACCURACY", "MSE"]
    job = json.loads((exp / "01_graph_optimize" / "job.json").read_text())
    assert [e["measurement_id"] for e in job["evaluation"]] == [record["measurement_id"]]
    text = " ".join(run_np("report", cwd=exp).stdout.split())
    assert "Post-hoc Measurements (1) [ np evaluate (post-hoc) — Target: graph_optimize ]" in text
    plain = run_np("report", "--plain", cwd=exp).stdout
    assert "section:posthoc_evaluation:graph_optimize" in plain
    data = run_np("report", "--json", cwd=exp).json
    assert any(e["trigger"] == "POSTHOC" for e in data["evaluation"])
    bare = tmp_path / "bare.npz"  # not there
    unknown = run_np("evaluate", "--metric", "NOPE", cwd=exp)
    assert unknown.exit_code == 2 and "TOP1_ACCURACY" in unknown.stderr + unknown.stdout
    missing = run_np("evaluate", "--dataset", str(bare), cwd=exp)
    assert missing.exit_code == 3 and str(bare) in " ".join((missing.stdout + missing.stderr).split())


def test_amp_greedy_targets_the_top1_drop(run_np, digits_run, tmp_path: Path) -> None:
    exp = copy_workspace(digits_run[0], tmp_path)
    (exp / "run.yaml").write_text(RUN_YAML.replace("automatic_mixed_precision: null",
                                                   "automatic_mixed_precision: GREEDY"))
    (exp / "run.detail.yaml").write_text("detail:\n  graph_quantize[0]:\n    amp:\n      target_top1_drop: 0.0\n")
    result = run_np("run", "--retry", cwd=exp)
    assert result.exit_code == 0, result.stdout + result.stderr
    amp = json.loads((exp / "02_graph_quantize" / "job.json").read_text())["changes"]["amp"]
    assert amp["objective"] == "TOP1_ACCURACY drop" and amp["samples"] == 360 and amp["dataset"] == "digits_val"
    assert amp["float_top1"] >= 0.95 and "target_snr_db" not in amp
    # W8-A8 loses no accuracy on this model (0.9833 vs 0.9806 float), so no layer needs to stay in float
    assert amp["result"] == "target met with every layer quantized" and amp["achieved_top1_drop"] <= 0.0
    assert "GREEDY on TOP1: float" in (exp / "logs" / "execution.log").read_text()
