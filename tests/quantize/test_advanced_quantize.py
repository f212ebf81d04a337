"""advanced_quantize: every algorithm x scheme on the built-in LLM, lowering for XNNPACK, graph_quantize leaving the
AQ layers as they are, the activation-outlier case AWQ/GPTQ exist for, Hugging Face folders, and clear refusals."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from np_optimizer.config.options import merge_defaults
from np_optimizer.config.steps import step_spec
from np_optimizer.errors import ModelError
from np_optimizer.fidelity import snr_db
from np_optimizer.models.llm import TinyLlamaConfig, build_tiny_llm, calibration_samples
from np_optimizer.quantize.aq import AQ_ALGORITHMS, AQ_SCHEMES, aq_layers, linear_layers, quantize_model
from np_optimizer.quantize.aq.modules import QuantizedLinear
from np_optimizer.quantize.aq.registry import AQParams

pytestmark = pytest.mark.filterwarnings("ignore")

FAST = AQParams(autoround_iters=25)  # AutoRound's 200 steps per layer are for real runs
SMALL = TinyLlamaConfig(n_layers=1)  # the same architecture, one block: for tests that lower to XNNPACK


def _options(**changes: Any) -> dict[str, Any]:
    options = merge_defaults(step_spec("advanced_quantize").options, None)
    for path, value in changes.items():
        section, key = path.split("__")
        options[section][key] = value
    return options


def _snr(model: nn.Module, evaluation: list[tuple[torch.Tensor, ...]], reference: list[torch.Tensor]) -> float:
    with torch.no_grad():
        return snr_db(reference, [model(*x) for x in evaluation])


def _tensors(llm: SimpleNamespace) -> list[torch.Tensor]:
    inputs = [t for sample in (*llm.calibration, *llm.evaluation) for t in sample]
    return [*llm.model.state_dict().values(), *inputs, *llm.reference]


@pytest.fixture(scope="module")
def llm() -> Iterator[SimpleNamespace]:
    """The float tiny_llm, its calibration and evaluation windows: tests quantize a copy.deepcopy of the model, and
    teardown checks that none changed the shared one (or its inputs) in place."""
    model, example = build_tiny_llm(0)
    windows = calibration_samples()
    evaluation = [example, *windows[-4:]]
    with torch.no_grad():
        reference = [model(*x) for x in evaluation]
    shared = SimpleNamespace(model=model, example=example, calibration=windows[:16], evaluation=evaluation,
                             reference=reference)
    before = [t.clone() for t in _tensors(shared)]
    yield shared
    after = _tensors(shared)
    assert len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(after, before)), \
        "a test changed the shared tiny_llm or its windows in place: quantize copy.deepcopy(llm.model)"


# Output SNR (dB) against the float model that each scheme must reach on tiny_llm with 16 calibration windows.
MIN_SNR = {"W4-A8_dynamic": 18.0, "W8-A8_dynamic": 30.0, "W8-A8": 20.0}


@pytest.mark.heavy
@pytest.mark.parametrize("scheme", AQ_SCHEMES)
@pytest.mark.parametrize("algorithm", AQ_ALGORITHMS)
def test_each_algorithm_and_scheme(llm: SimpleNamespace, algorithm: str, scheme: str) -> None:
    model = copy.deepcopy(llm.model)
    names = linear_layers(model)
    result = quantize_model(model, algorithm=algorithm, scheme=scheme, options=_options(), calibration=llm.calibration,
                            params=FAST)
    assert result.model is model and not linear_layers(model)
    quantized = {name: m for name, m in model.named_modules() if isinstance(m, QuantizedLinear)}
    assert list(quantized) == names == [row["module"] for row in result.layers]
    bits = 4 if scheme.startswith("W4") else 8
    for module in quantized.values():
        assert module.bits == bits
        assert module.group_size == (32 if bits == 4 else None)  # 8-bit weights are per channel on XNNPACK
        assert module.mode == ("static" if scheme == "W8-A8" else "dynamic")
        assert int(module.qweight.min()) >= module.qmin and int(module.qweight.max()) <= module.qmax
    if scheme == "W8-A8":
        assert {a["option"] for a in result.adjustments} == {"weight.granularity", "activation.granularity"}
    assert _snr(model, llm.evaluation, llm.reference) > MIN_SNR[scheme]
    program = torch.export.export(model, llm.example)
    rows = aq_layers(program)
    assert [row["module"] for row in rows] == names
    expected = "int4 groups of 32" if bits == 4 else "int8 per channel"
    assert {row["weight"] for row in rows} == {expected}
    with torch.no_grad():
        assert torch.allclose(program.module()(*llm.example), model(*llm.example), atol=1e-5)


def test_options_change_the_quantizer(llm: SimpleNamespace) -> None:
    model = copy.deepcopy(llm.model)
    result = quantize_model(model, algorithm="RTN", scheme="W4-A8_dynamic",
                            options=_options(weight__granularity="GROUP", weight__group_size=64,
                                             weight__calibration_method="HISTOGRAM", activation__granularity="TENSOR"),
                            calibration=llm.calibration[:4])
    layer = model.get_submodule("layers.0.mlp.down_proj")
    assert layer.group_size == 64 and layer.granularity == "TENSOR"
    assert result.scheme.weight.method == "HISTOGRAM" and result.adjustments == []
    channel = copy.deepcopy(llm.model)
    quantize_model(channel, algorithm="RTN", scheme="W4-A8_dynamic", options=_options(weight__granularity="CHANNEL"),
                   calibration=llm.calibration[:4])
    assert channel.get_submodule("lm_head").group_size is None
    rows = aq_layers(torch.export.export(model, llm.example))
    assert rows[0]["activation"] == "int8 dynamic per-tensor" and rows[0]["weight"] == "int4 groups of 64"


@pytest.mark.heavy
def test_static_w8a8_lowers_to_xnnpack_and_runs(tmp_path: Path) -> None:
    from np_optimizer.adapters.executorch_runtime import run_pte
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import save_program

    model, example = build_tiny_llm(0, config=SMALL)
    with torch.no_grad():
        reference = model(*example)
    quantize_model(model, algorithm="SMOOTHQUANT", scheme="W8-A8", options=_options(),
                   calibration=calibration_samples(16))
    path = save_program(torch.export.export(model, example), tmp_path / "aq.pt2")
    result = compile_checkpoint(path, get_device("raspberry_pi_5"), tmp_path / "compiled")
    assert result.status == "ok" and result.num_delegates >= 1
    outside = " ".join(result.non_delegated_histogram)
    assert "quantize" not in outside and "linear" not in outside and "mm" not in outside.replace("mean", "")
    with torch.no_grad():
        eager = model(*example)
    pte = run_pte(tmp_path / "compiled" / str(result.pte_file), example)[0]
    assert snr_db(eager, pte) > 30  # the .pte computes what the eager quantized model computes
    assert snr_db(reference, pte) > 20


@pytest.mark.heavy
def test_graph_quantize_leaves_aq_layers_as_they_are() -> None:
    from np_optimizer.quantize.aq.program import aq_modules
    from np_optimizer.quantize.pt2e import quantize_program

    model, example = build_tiny_llm(0, config=SMALL)
    quantize_model(model, algorithm="RTN", scheme="W4-A8_dynamic", options=_options(),
                   calibration=calibration_samples(4))
    program = torch.export.export(model, example)
    before = aq_layers(program)
    keep = aq_modules(program)
    samples = calibration_samples(4)
    kept = quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=samples,
                            keep_float=keep)
    after = aq_layers(kept)
    assert [(r["module"], r["weight"], r["activation"]) for r in after] == \
        [(r["module"], r["weight"], r["activation"]) for r in before]
    qweights = {k: v for k, v in program.state_dict.items() if k.endswith("qweight")}
    kept_weights = {k: v for k, v in {**kept.state_dict, **kept.constants}.items() if k.endswith("qweight")}
    assert qweights and all(torch.equal(qweights[k], kept_weights[k]) for k in qweights)
    # Without keep_float the PT2E quantizer re-quantizes the dequantized int4 weights (to int8): the reason for it.
    requantized = quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=samples)
    assert {row["weight"] for row in aq_layers(requantized)} == {"int8 per channel"}


@pytest.mark.heavy
def test_awq_and_gptq_beat_rtn_on_activation_outliers() -> None:
    """The case the algorithms exist for: a few input channels x64 (weights /64, same float function)."""
    model, example = build_tiny_llm(0, outlier_channels=4, outlier_scale=64.0)
    windows = calibration_samples()
    calibration, evaluation = windows[:-8], [example, *windows[-8:]]
    with torch.no_grad():
        reference = [model(*x) for x in evaluation]
    snr = {}
    for algorithm in ("RTN", "AWQ", "GPTQ"):
        quantized = copy.deepcopy(model)
        quantize_model(quantized, algorithm=algorithm, scheme="W4-A8_dynamic", options=_options(),
                       calibration=calibration)
        snr[algorithm] = _snr(quantized, evaluation, reference)
    assert snr["AWQ"] > snr["RTN"] + 3.0, snr
    assert snr["GPTQ"] > snr["RTN"] + 1.0, snr


def test_model_without_linear_layers_is_a_clear_error() -> None:
    convs = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 3)).eval()
    with pytest.raises(ModelError) as info:
        quantize_model(convs, algorithm="AWQ", scheme="W4-A8_dynamic", options=_options(),
                       calibration=[(torch.randn(1, 3, 16, 16),)])
    assert info.value.code == "NP-AQ-422"
    assert "no nn.Linear" in info.value.message and "graph_quantize" in (info.value.hint or "")


def test_exported_program_only_project_is_refused(tmp_path: Path) -> None:
    from np_optimizer.config.availability import aq_model_unsupported_reason, aq_unavailable_reason
    from np_optimizer.models.source import LoadedModel
    from np_optimizer.pipeline.steps.advanced_quantize import AdvancedQuantizeConfig, advanced_quantize

    assert all(aq_unavailable_reason(a, s) is None for a in AQ_ALGORITHMS for s in AQ_SCHEMES)
    assert "AWQ2" in (aq_unavailable_reason("AWQ2", "W8-A8") or "")
    spec = {"kind": "pt2", "name": "m", "file": "model/model.pt2", "factory": None, "seed": 0, "source": "m.pt2",
            "sha256": None}
    assert "exported program" in (aq_model_unsupported_reason(spec) or "")
    assert aq_model_unsupported_reason({"kind": "builtin", "name": "tiny_llm"}) is None
    project = SimpleNamespace(name="p", info={"model": spec}, root=tmp_path)
    run = SimpleNamespace(loaded_model=LoadedModel(None, object(), ()), project=project)
    ctx = SimpleNamespace(run=run, progress=lambda _t: None)
    with pytest.raises(ModelError) as info:
        advanced_quantize(ctx, AdvancedQuantizeConfig(algorithm="RTN", scheme="W8-A8"))  # type: ignore[arg-type]
    assert "exported program" in info.value.message and "graph_quantize" in (info.value.hint or "")


def test_hugging_face_folder_offline(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from np_optimizer.models.source import copy_model_into, load_model

    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    original = transformers.LlamaForCausalLM(config).eval()
    folder = tmp_path / "tiny-llama"
    original.save_pretrained(folder)
    project = tmp_path / "project"
    project.mkdir()
    spec = copy_model_into(str(folder), project)
    assert spec.kind == "hf" and spec.file == "model/hf" and (project / "model/hf/config.json").is_file()
    loaded = load_model(spec, project)
    (ids,) = loaded.example_inputs
    assert loaded.module is not None and ids.shape == (1, 32) and ids.dtype == torch.int64
    with torch.no_grad():
        assert torch.allclose(loaded.module(ids), original(input_ids=ids).logits, atol=1e-5)
    calibration = [(torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(i)),) for i in range(8)]
    result = quantize_model(loaded.module, algorithm="GPTQ", scheme="W4-A8_dynamic", options=_options(),
                            calibration=calibration)
    assert len(result.layers) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and lm_head
    program = torch.export.export(loaded.module, (ids,))
    assert len(aq_layers(program)) == 15
    with pytest.raises(ModelError, match="no config.json"):
        copy_model_into(str(tmp_path), tmp_path / "other")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ModelError, match="no weights"):
        copy_model_into(str(tmp_path / "empty"), tmp_path / "other2")


def test_step_loads_the_eager_model_when_input_model_was_reused(tmp_path: Path) -> None:
    """Under --retry INPUT_MODEL is reused and nothing loaded the model: the step loads it from project.json."""
    import logging

    from np_optimizer.models.source import ModelSpec
    from np_optimizer.pipeline.steps.advanced_quantize import AdvancedQuantizeConfig, advanced_quantize
    from np_optimizer.records import to_dict

    spec = to_dict(ModelSpec("builtin", name="tiny_llm", source="tiny_llm"))
    project = SimpleNamespace(name="p", info={"model": spec}, root=tmp_path)
    run = SimpleNamespace(loaded_model=None, project=project, calibration_dir=None, example_inputs=())
    options = _options()
    options["parameters"]["calibration"]["num_samples"] = 8
    ctx = SimpleNamespace(run=run, options=options, log=logging.getLogger("test"), progress=lambda _t: None)
    outcome = advanced_quantize(ctx, AdvancedQuantizeConfig(algorithm="AWQ", scheme="W4-A8_dynamic"))  # type: ignore
    assert run.loaded_model is not None and run.loaded_model.module is not None
    changes = outcome.changes
    assert changes["algorithm"] == "AWQ" and changes["scheme"] == "W4-A8_dynamic"
    assert changes["calibration"] == {"samples": 8, "source": "built-in calibration text (8 windows of 32 tokens)"}
    assert changes["quantized_layers"] == 15 and len(changes["layers"]) == 15
    assert changes["options_used"]["weight"] == {"granularity": "GROUP", "group_size": 32,
                                                 "calibration_method": "MINMAX"}
    assert "torchao.prototype.awq" in changes["implementation"]
    assert len(aq_layers(outcome.program)) == 15


@pytest.mark.np_run
def test_sample_llm_pipeline_aq(tmp_path: Path) -> None:
    """np run on the sample LLM project (AQ GPTQ W4-A8_dynamic), the checkpoint lowered for XNNPACK and run here.
    That graph_quantize then leaves AQ's layers as they are is tested on a smaller model
    (test_graph_quantize_leaves_aq_layers_as_they_are) and through the CLI on Llama and Qwen2 (test_architectures)."""
    from np_optimizer import api
    from np_optimizer.runner import run_experiment
    from np_optimizer.workspace import Experiment

    root = tmp_path / "ws"
    api.workspace_init(root)
    exp_dir = root / "sample_llm" / "experiment_01"
    assert "algorithm: AWQ" in (exp_dir / "run.yaml").read_text()
    (exp_dir / "run.yaml").write_text('version: "1.0"\nsteps:\n- advanced_quantize:\n  - algorithm: GPTQ\n'
                                      "    scheme: W4-A8_dynamic\n")
    summary = run_experiment(Experiment(exp_dir))
    assert summary.status == "success", summary.error
    aq = json.loads((exp_dir / "01_advanced_quantize" / "job.json").read_text())
    changes = aq["changes"]
    assert changes["algorithm"] == "GPTQ" and changes["quantized_layers"] == 15
    assert changes["calibration"]["source"].startswith("built-in calibration text")
    assert aq["compile"]["status"] == "ok" and aq["fidelity"]["pte"]["snr_db"] > 20


