"""Real architectures through the real CLI: small configs of the common families (a CNN, a ViT, a BERT encoder and
two decoders, one of them skipped: SKIPPED) built from `transformers` configs with random weights, saved with save_pretrained, then
`np projects create --model <folder>` and `np run` on raspberry_pi_5: GQ for the CNN and ViT, GO + GQ for BERT (GO on
an attention graph; on a conv-BN-ReLU CNN it runs in every sample_cpu test), AQ + GQ for the decoders.

The configs are as small as the families allow (one block each), and each run profiles its final checkpoint only
(so np run lowers INPUT_MODEL and that one; the AQ and GO checkpoints are in the final one): ExecuTorch's XNNPACK
lowering, done once per lowered checkpoint (8 here: the Llama family is skipped, see SKIPPED), is about three quarters of the time, and it grows with the number of graph nodes, not with the
weights. The families run one after the other in the test's own process, through np's entry point (as the `run_np`
fixture runs np): the suite's pytest workers already keep every core busy, so worker processes of the matrix's own
only paid another import of torch, ExecuTorch and transformers each (about 10 CPU-s) and ran against the other
pytest worker. On 2 otherwise idle cores the matrix took about 55 s with Llama in two worker processes (measured
2026-12-07; 75 s when every checkpoint was lowered).

The Qwen2 config uses a sliding window shorter than the sequence, so the model cannot take np's constant positions
and mask and computes them in its graph (`arange(32) + 0`, then `aten.index`): the integer arithmetic that ExecuTorch's
XNNPACKQuantizer once turned into float indices ("tensors used as indices must be long, int, byte or bool tensors").
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import NpResult

pytest.importorskip("transformers")
pytestmark = [pytest.mark.np_run, pytest.mark.own_steps]  # own_steps: each family's steps must really run


@dataclass(frozen=True)
class Family:
    name: str
    architecture: str  # the transformers class, as config.json's `architectures` names it
    config: str  # the transformers config class
    kwargs: dict[str, Any]
    steps: str

    def save(self, folder: Path) -> Path:
        import torch
        import transformers

        torch.manual_seed(0)
        config = getattr(transformers, self.config)(**self.kwargs)
        getattr(transformers, self.architecture)(config).eval().save_pretrained(folder)
        return folder


_DECODER = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64}

FAMILIES = [
    Family("cnn_resnet", "ResNetForImageClassification", "ResNetConfig",  # image_size: np's input (default 224)
           {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "layer_type": "basic", "num_labels": 10,
            "image_size": 64}, "gq"),
    Family("vit", "ViTForImageClassification", "ViTConfig",
           {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
            "image_size": 32, "patch_size": 8, "num_labels": 10}, "gq"),
    Family("bert", "BertForSequenceClassification", "BertConfig",
           {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "max_position_embeddings": 64, "num_labels": 2}, "go,gq"),
    Family("llama", "LlamaForCausalLM", "LlamaConfig", _DECODER, "aq,gq"),  # GO on attention: BERT
    Family("qwen2", "Qwen2ForCausalLM", "Qwen2Config",
           {**_DECODER, "use_sliding_window": True, "sliding_window": 16, "max_window_layers": 0}, "aq,gq"),
]
# A decoder lowers to 9 XNNPACK delegates, each of its two lowerings about 4 times a ViT's: a third of the matrix
SKIPPED = {"llama": "qwen2 runs Llama's layers (RMSNorm, rotary positions, grouped-query attention, SiLU-gated MLP) "
                    "plus q/k/v biases and a sliding window through AQ + GQ, and sample_llm (test_advanced_quantize.py) "
                    "a Llama-style model through AQ, GO and GQ"}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _detail(steps: str) -> str:
    """run.detail.yaml with fewer calibration and evaluation samples than the defaults (32 and 8): the families are
    what is under test here, and each sample is a forward pass through PT2E's histogram observers."""
    aq = "  advanced_quantize[0]:\n    parameters:\n      calibration:\n        num_samples: 8\n"
    return ("detail:\n  evaluation:\n    num_samples: 4\n" + (aq if "aq" in steps.split(",") else "")
            + "  graph_quantize[0]:\n    calibration:\n      num_samples: 8\n")


_STEP_JOBS = {"aq": "advanced_quantize", "go": "graph_optimize", "gq": "graph_quantize"}


@dataclass
class FamilyRun:
    family: Family
    experiment: Path
    commands: list[tuple[list[str], NpResult]]  # every np command run, in order, with its result
    seconds: float
    cpu_seconds: float  # this process's CPU time for this family (all threads): the cost without other load

    @property
    def result(self) -> NpResult:
        return self.commands[-1][1]

    def failure(self) -> str:
        """What went wrong, for an assertion message: each command and its output, then the end of the log."""
        log = self.experiment / "logs" / "execution.log"
        lines = [f"$ np {' '.join(args)} -> {r.exit_code}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
                 for args, r in self.commands]
        tail = log.read_text(encoding="utf-8")[-4000:] if log.is_file() else "(no execution.log)"
        return "\n".join(lines) + f"\n--- execution.log (end) ---\n{tail}"


def _np(args: list[str], cwd: Path) -> NpResult:
    """`np ARGS` in this process through the CLI's entry point, as the `run_np` fixture does."""
    import contextlib
    import io

    from np_optimizer.cli.main import main

    os.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return NpResult(code, out.getvalue(), err.getvalue())


def _run_family(family: Family, root: Path) -> FamilyRun:
    """Save the family's model folder, then `np workspace init`, `np projects create --model
    <folder>`, `np experiments create --steps ...` and `np run`, stopping at the first command that fails."""
    started, cpu = time.perf_counter(), time.process_time()
    root.mkdir(parents=True)
    folder = family.save(root / f"{family.name}_hf")
    ws = root / "ws"
    exp = ws / family.name / "experiment_01"
    commands: list[tuple[list[str], NpResult]] = []
    for args, cwd in ((["workspace", "init", str(ws)], root),
                      (["projects", "create", "--name", family.name, "--model", str(folder), "--device",
                        "raspberry_pi_5", "--json"], ws),
                      (["experiments", "create", "--steps", family.steps, "--name", "experiment_01"],
                       ws / family.name),
                      (["run", "--json"], exp)):
        if args[0] == "run":
            (exp / "run.detail.yaml").write_text(_detail(family.steps), encoding="utf-8")
            run_yaml = (exp / "run.yaml").read_text(encoding="utf-8")  # the final checkpoint profiled, so np run
            (exp / "run.yaml").write_text(run_yaml[:run_yaml.index("profile:")]  # lowers it and INPUT_MODEL only
                                          + "profile:\n- GRAPH_QUANTIZE\n", encoding="utf-8")
        result = _np(args, cwd)
        commands.append((args, result))
        if result.exit_code != 0:
            break
    return FamilyRun(family, exp, commands, time.perf_counter() - started, time.process_time() - cpu)


@pytest.fixture(scope="module")
def family_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, FamilyRun]:
    """Every selected family (all of them, or those `-k` kept) run once, in this process, the longest (the decoders)
    first; the working folder np's commands change to is restored after."""
    selected = {item.callspec.params["family"].name for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "family" in item.callspec.params
                } - SKIPPED.keys()
    root = tmp_path_factory.mktemp("architectures")
    order = sorted((f for f in FAMILIES if f.name in selected), key=lambda f: "aq" not in f.steps.split(","))
    cwd = os.getcwd()
    try:
        return {f.name: _run_family(f, root / f.name) for f in order}
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("family", [pytest.param(f, id=f.name, marks=pytest.mark.skip(reason=SKIPPED[f.name])
                                                  if f.name in SKIPPED else ()) for f in FAMILIES])
def test_family_runs_end_to_end(family: Family, family_runs: dict[str, FamilyRun], run_np: Any) -> None:
    run = family_runs[family.name]
    result, exp = run.result, run.experiment
    assert [args[0] for args, _r in run.commands] == ["workspace", "projects", "experiments", "run"], run.failure()
    assert result.exit_code == 0, run.failure()
    assert run.commands[1][1].json["model"]["kind"] == "hf"
    assert result.json["status"] == "success", run.failure()
    expected = ["00_input_model"] + [f"{i:02d}_{_STEP_JOBS[s]}" for i, s in enumerate(family.steps.split(","), 1)]
    assert [job["name"] for job in result.json["jobs"]] == expected
    assert all(job["status"] == "success" for job in result.json["jobs"]), result.json["jobs"]

    jobs = {name: json.loads((exp / name / "job.json").read_text(encoding="utf-8")) for name in expected}
    for name, job in jobs.items():  # lowered: INPUT_MODEL (the baseline) and the final checkpoint (profiled)
        if name in ("00_input_model", expected[-1]):
            assert job["compile"]["status"] == "ok", (name, job["compile"]["reason"])
        else:  # an intermediate checkpoint not listed under profile: saved and checked, not lowered
            assert not job["compile"].get("status"), (name, job["compile"])
        if name != "00_input_model":  # every step's output against INPUT_MODEL as a program, the final's as the .pte
            program = job["fidelity"]["program"]  # an SNR in dB, or None with snr_identical (no change at all)
            assert program["snr_identical"] or _is_number(program["snr_db"]), (name, job["fidelity"])
    assert "snr_db" in jobs[expected[-1]]["fidelity"]["pte"], jobs[expected[-1]]["fidelity"]
    gq = jobs[expected[-1]]
    assert gq["compile"]["num_delegates"] > 0 and gq["compile"]["delegated_ops"] > 0, gq["compile"]
    assert gq["changes"]["quantized_layers"] > 0 and gq["changes"]["calibration"]["samples"] == 8, gq["changes"]
    assert _is_number(gq["fidelity"]["program"]["snr_db"]) and gq["fidelity"]["program"]["snr_db"] > 5, gq["fidelity"]
    if "aq" in family.steps:
        aq = jobs["01_advanced_quantize"]
        assert aq["changes"]["quantized_layers"] > 0 and aq["changes"]["weight"].startswith("int4")
        assert gq["changes"]["advanced_quantize_layers"]["count"] == aq["changes"]["quantized_layers"]
        labelled = {row["module"] for row in gq["changes"]["layers"] if row.get("source") == "advanced_quantize"}
        assert labelled == set(gq["changes"]["advanced_quantize_layers"]["kept_as_is"]), labelled  # not PT2E's own

    report = run_np("report", "--json", cwd=exp)
    assert report.exit_code == 0, report.stderr
    gq_step = next(step for step in report.json["pipeline"]["steps"] if step["name"] == expected[-1])
    snr = [m for m in gq_step["metrics"] if m["metric_type"] == "SNR"]
    assert snr and snr[0]["comparison_model"] == "INPUT_MODEL" and _is_number(snr[0]["value"]), gq_step["metrics"]
    delegated, total = gq["compile"]["delegated_ops"], gq["compile"]["delegated_ops"] + gq["compile"]["non_delegated_ops"]
    print(f"{family.name}: {family.steps} in {run.seconds:.0f} s ({run.cpu_seconds:.0f} s CPU), "
          f"GQ SNR {snr[0]['value']} dB, {delegated}/{total} ops delegated")


def test_integer_scalars_stay_integer_through_the_quantizer() -> None:
    """Integer arithmetic with a Python scalar (`arange(t) + 0`, then indexing) survives PT2E quantization: the
    scalar gets an int64 constant before XNNPACKQuantizer's scalar-to-float-tensor transform can see it, so
    graph_quantize need not keep the integer ops float (which split Ethos-U partitions: BERT on alif_e8)."""
    import torch
    from torch import nn

    from np_optimizer.graph.program_io import export_model
    from np_optimizer.quantize.pt2e import quantize_program

    class Positions(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Parameter(torch.randn(8, 16))
            self.linear = nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            positions = torch.arange(x.shape[1]) + 0
            return self.linear(x + self.table[positions].unsqueeze(0))

    torch.manual_seed(0)
    example = (torch.randn(1, 8, 16),)
    program = export_model(Positions().eval(), example)
    calibration = [(torch.randn(1, 8, 16),) for _ in range(4)]
    quantized = quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=calibration)
    with torch.no_grad():
        reference, output = program.module()(*example), quantized.module()(*example)
    assert torch.allclose(reference, output, atol=0.1)
