"""graph_quantize's `embedding` option on a small model with an nn.Embedding (1000 x 64) and a Linear head: the tables
quantized on the exported program, lowered to ExecuTorch's quantized embedding kernels, run on this machine's runtime
(np's adapter and the measuring script), and one np run on raspberry_pi_5 with the option at its default (int8) and
then off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_project

ROWS, DIM = 1000, 64
TABLE_ELEMENTS = ROWS * DIM

MODEL = f'''
import torch


class TinyEmbedder(torch.nn.Module):
    def __init__(self, tied: bool = False) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding({ROWS}, {DIM})
        self.head = torch.nn.Linear({DIM}, 16)
        self.tied = tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        return x @ self.emb.weight[:16].t() if self.tied else self.head(x)


def build(tied: bool = False):
    torch.manual_seed(0)
    ids = torch.randint(0, {ROWS}, (1, 32), generator=torch.Generator().manual_seed(0))
    return TinyEmbedder(tied).eval(), (ids,)
'''


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("embedder") / "embedder.py"
    path.write_text(MODEL, encoding="utf-8")
    return path


def _program(model_file: Path, tied: bool = False) -> tuple[Any, tuple[Any, ...]]:
    import importlib.util

    from np_optimizer.graph.program_io import export_model

    spec = importlib.util.spec_from_file_location("embedder_model", model_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs = module.build(tied)
    return export_model(model, inputs), inputs


def test_tables_quantize_per_row_and_per_group() -> None:
    import torch

    from np_optimizer.quantize.embedding import quantize_table

    weight = torch.randn(10, 64, generator=torch.Generator().manual_seed(0))
    weight[3] = 0.0
    q, scales = quantize_table(weight, 8, None)
    assert q.dtype == torch.int8 and scales.shape == (10,) and float(scales[3]) == 1.0 and not q[3].any()
    assert float((q.float() * scales[:, None] - weight).abs().max()) <= float(scales.max()) / 2 + 1e-6
    q4, scales4 = quantize_table(weight, 4, 32)
    assert scales4.shape == (10, 2) and int(q4.min()) >= -8 and int(q4.max()) <= 7
    dequantized = (q4.float().reshape(10, 2, 32) * scales4[..., None]).reshape(10, 64)
    assert float((dequantized - weight).abs().max()) <= float(scales4.max()) / 2 + 1e-6


def test_tied_kept_and_ungroupable_tables_stay_float(model_file: Path) -> None:
    from np_optimizer.quantize.embedding import quantize_embeddings

    tied, _ = _program(model_file, tied=True)
    same, report = quantize_embeddings(tied, bits=8, group_size=32)
    assert same is tied and not report["layers"]
    assert "also read by" in report["left_float"][0]["reason"], report
    program, _ = _program(model_file)
    same, report = quantize_embeddings(program, bits=8, group_size=32, keep_float={"emb"})
    assert same is program and report["left_float"] == [{"module": "emb", "node": "embedding",
                                                         "reason": "kept float as configured"}]
    same, report = quantize_embeddings(program, bits=4, group_size=128)
    assert same is program and "groups of 128" in report["left_float"][0]["reason"]


@pytest.mark.heavy
def test_quantized_tables_lower_to_the_embedding_kernels_and_run_here(model_file: Path, tmp_path: Path) -> None:
    """int8 and int4 tables: counted at one byte per element in the checkpoint, fused into embedding_byte /
    embedding_4bit at lowering (outside the XNNPACK delegate), the .pte smaller by about 3 (int8) or 3.5 (int4
    packed) bytes per element, and giving the checkpoint's own outputs on np's runtime adapter and in the measuring
    script (a fresh process, as on a device)."""
    import torch

    from np_optimizer.adapters.executorch_runtime import run_pte
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.embedding_kernels import fuse_quantized_embeddings
    from np_optimizer.graph.program_io import save_program
    from np_optimizer.graph.stats import count_params, weight_bytes
    from np_optimizer.profiler.measure import script_archive
    from np_optimizer.quantize.embedding import quantize_embeddings
    from np_optimizer.quantize.pt2e import quantized_layers

    program, inputs = _program(model_file)
    device = get_device("raspberry_pi_5")

    def lower(name: str, checkpoint: Any) -> tuple[int, Path]:
        compiled = compile_checkpoint(save_program(checkpoint, tmp_path / f"{name}.pt2"), device, tmp_path / name)
        assert compiled.status == "ok", compiled.reason
        return int(compiled.pte_bytes or 0), tmp_path / name / str(compiled.pte_file)

    float_bytes, _ = lower("float", program)
    for bits, kernel, saved_per_element in ((8, "embedding_byte", 3), (4, "embedding_4bit", 3.5)):
        quantized, report = quantize_embeddings(program, bits=bits, group_size=32)
        row = report["layers"][0]
        assert row["module"] == "emb" and row["weight"] == ("int8 per row" if bits == 8 else "int4 groups of 32")
        assert row["table_snr_db"] > (40 if bits == 8 else 18), row
        scales = ROWS if bits == 8 else ROWS * DIM // 32
        assert weight_bytes(program) - weight_bytes(quantized) == 3 * TABLE_ELEMENTS - 4 * scales
        assert count_params(quantized) == count_params(program)
        assert {r["module"]: r["weight"] for r in quantized_layers(quantized)}["emb"] == f"int{bits}"
        fused, count = fuse_quantized_embeddings(quantized)  # what the lowering hands to ExecuTorch: still counted
        assert count == 1 and count_params(fused) == count_params(program)
        assert weight_bytes(quantized) - weight_bytes(fused) == (0 if bits == 8 else TABLE_ELEMENTS // 2)
        size, pte = lower(f"int{bits}", quantized)
        ops = json.loads((pte.parent / "layers_graph.json").read_text())["ops"]
        assert any(kernel in str(op["op"]) and not op["delegated"] and op["module"] == "emb" for op in ops), ops
        expected = saved_per_element * TABLE_ELEMENTS - 4 * scales
        assert 0.97 * expected < float_bytes - size < 1.03 * expected, (float_bytes, size, expected)
        with torch.no_grad():
            reference = quantized.module()(*inputs)
        assert torch.allclose(run_pte(pte, inputs)[0], reference, atol=1e-5)

    # the measuring script np runs on devices (and on this machine) loads the quantized kernels itself
    proc = subprocess.run([sys.executable, str(script_archive()), str(pte), "--warmup", "1", "--runs", "2",
                           "--int-range", f"0:{ROWS}"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    doc = json.loads([ln for ln in proc.stdout.splitlines() if ln.strip()][-1])
    assert proc.returncode == 0 and doc["ok"], doc.get("error")
    assert doc["runtime"]["quantized_kernels"] is True


def test_the_arm_quantizer_quantizes_embeddings_itself_and_keeps_their_module(model_file: Path) -> None:
    """On Ethos-U the Arm quantizer turns the embedding into a gather on its own int8 table (the U85 runs it on the
    NPU): no float table is left for the option, and the gather keeps its embedding's module (its layer key, so
    layers_snr.json compares it with INPUT_MODEL's embedding), although the Arm pass that makes it drops it."""
    from np_optimizer.quantize.embedding import quantize_embeddings
    from np_optimizer.quantize.pt2e import module_path, quantize_program, quantized_layers

    program, inputs = _program(model_file)
    quantized = quantize_program(program, backend="ethos-u", scheme="W8-A8", target="ethos-u85-256",
                                 calibration=[inputs])
    gathers = [n for n in quantized.graph.nodes if str(n.target) == "aten.index_select.default"]
    assert [module_path(n) for n in gathers] == ["emb"]
    assert {r["module"]: (r["op"], r["weight"]) for r in quantized_layers(quantized)}["emb"] == (
        "aten.index_select", "int8")
    same, report = quantize_embeddings(quantized, bits=8, group_size=32)
    assert same is quantized and report["layers"] == [] == report["left_float"]


@pytest.mark.np_run
def test_np_run_quantizes_the_embedding_by_default_and_off_keeps_it_float(run_np, workspace: Path,
                                                                         model_file: Path) -> None:
    detail = ("detail:\n  evaluation:\n    num_samples: 4\n  graph_quantize[0]:\n    calibration:\n"
              "      num_samples: 4\n")
    exp = make_project(workspace, "embedder", model=f"{model_file}:build", device="raspberry_pi_5", steps="gq",
                       detail_yaml=detail)
    result = run_np("run", "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout[-3000:]

    def jobs() -> tuple[dict[str, Any], dict[str, Any]]:
        return tuple(json.loads((exp / name / "job.json").read_text())  # type: ignore[return-value]
                     for name in ("00_input_model", "01_graph_quantize"))

    source, gq = jobs()
    embedding = gq["changes"]["embedding"]
    assert embedding["bits"] == 8 and embedding["layers"][0]["module"] == "emb", embedding
    assert embedding["layers"][0]["weight"] == "int8 per row" and embedding["layers"][0]["by"] == "embedding option"
    assert gq["changes"]["float_weights"]["float_elements"] == 0
    # the table at 1 byte per element, in the checkpoint's statistics and in the .pte
    assert source["output"]["weight_bytes"] - gq["output"]["weight_bytes"] > 3 * TABLE_ELEMENTS - 4 * ROWS
    saved = source["compile"]["pte_bytes"] - gq["compile"]["pte_bytes"]
    assert 3 * TABLE_ELEMENTS - 4 * ROWS < saved < 3 * TABLE_ELEMENTS + 4 * 1040, saved  # + the head's int8 weights
    # the step's fidelity: the exported program, and the .pte on this machine's runtime
    fidelity = gq["fidelity"]
    assert fidelity["program"]["snr_db"] > 30 and "pte_error" not in fidelity, fidelity
    assert abs(fidelity["pte"]["snr_db"] - fidelity["program"]["snr_db"]) < 0.1, fidelity
    layers = json.loads((exp / "01_graph_quantize" / "artifacts" / "layers_snr.json").read_text())["layers"]
    emb = next(row for row in layers if row["key"] == "emb")
    assert emb["snr_db"] is not None and emb["snr_db"] > 30 and emb["reference_key"] == "emb", emb

    # off: the table stays float, as before the option (the step runs again, INPUT_MODEL is reused)
    (exp / "run.detail.yaml").write_text(detail + "    embedding:\n      bits: null\n", encoding="utf-8")
    result = run_np("run", "--retry", "--json", cwd=exp)
    assert result.exit_code == 0, result.stdout[-3000:]
    source, off = jobs()
    assert off["changes"]["embedding"]["layers"] == [{"module": "emb", "weight": "float",
                                                      "reason": "embedding.bits is null"}]
    assert off["changes"]["float_weights"]["float_layers"][0]["reason"] == "kept float as configured"
    assert 0 < source["compile"]["pte_bytes"] - off["compile"]["pte_bytes"] < 4 * 1040  # the head's weights only
    assert off["fidelity"]["pte"]["snr_db"] > fidelity["pte"]["snr_db"]
