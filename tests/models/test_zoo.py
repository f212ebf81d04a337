"""The zoo (issue 27): models built the way their authors ship them, with random weights and no download, each through
`np projects create` and `np run` (GQ) on raspberry_pi_5 and alif_e8.

Forms: an installed module's factory (ExecuTorch's own `executorch.examples.models`), a model package of three files
(a module, a blocks module, a config subpackage), a recurrent model in one file, and Hugging Face folders saved from
configs. A combination that takes over a minute on 2 cores, or that another test runs, is skipped (SKIPPED, with its
reason) only where a cheaper case runs what it would show: the module form runs with a Conv1d of
`executorch.examples.models`, recurrent cells with kws_lstm_gru_2_steps (raspberry_pi_5) and lstm_tiny (alif_e8),
MobileNetV2's inverted residuals in tests/test_registries.py. Hugging Face ViT, BERT and Qwen2 on
raspberry_pi_5 are the matrix of tests/pipeline/test_architectures.py, not repeated here.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.np_run, pytest.mark.slow]

KWS = '''import torch
from torch import nn


class Kws(nn.Module):
    """Conv1d over 49 frames, a 2-layer LSTM(128), a GRU(64), a linear head: the model issue 27 reports."""

    def __init__(self, steps=49):
        super().__init__()
        self.steps = steps
        self.conv = nn.Conv1d(40, 64, 3, padding=1)
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.gru = nn.GRU(128, 64, batch_first=True)
        self.fc = nn.Linear(64, 12)

    def forward(self, x):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.lstm(y)
        y, _ = self.gru(y)
        return self.fc(y[:, -1])


def kws():
    torch.manual_seed(0)
    return Kws().eval(), (torch.randn(1, 40, 49),)


def kws_short():
    """The same layers over 2 frames (a state carried from one to the next): the lowering unrolls every step, so 49
    take minutes and 4 took 36 s."""
    torch.manual_seed(0)
    return Kws(2).eval(), (torch.randn(1, 40, 2),)


class TinyLstm(nn.Module):
    """One LSTM(8, 16) over 2 frames and a linear head: the fewest unrolled cells that still carry a state."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


def lstm_tiny():
    torch.manual_seed(0)
    return TinyLstm().eval(), (torch.randn(1, 2, 8),)
'''

PACKAGE = {
    "net.py": "import torch\nfrom blocks import ConvBlock\nfrom config.sizes import WIDTHS\n\n\n"
              "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.blocks = torch.nn.Sequential(*(ConvBlock(a, b) for a, b in zip((3, *WIDTHS), WIDTHS)))\n"
              "        self.head = torch.nn.Linear(WIDTHS[-1], 10)\n\n"
              "    def forward(self, x):\n        return self.head(self.blocks(x).mean((2, 3)))\n\n\n"
              "def build():\n    torch.manual_seed(0)\n    return Net().eval(), (torch.randn(1, 3, 32, 32),)\n",
    "blocks.py": "import torch\n\n\nclass ConvBlock(torch.nn.Sequential):\n    def __init__(self, c_in, c_out):\n"
                 "        super().__init__(torch.nn.Conv2d(c_in, c_out, 3, padding=1), torch.nn.BatchNorm2d(c_out),\n"
                 "                         torch.nn.ReLU())\n",
    "config/__init__.py": "",
    "config/sizes.py": "WIDTHS = (8, 16)\n",
}

HF = {  # name: (architecture, config class, its arguments): as small as the family allows
    "mobilenet_v2": ("MobileNetV2ForImageClassification", "MobileNetV2Config",
                     {"depth_multiplier": 0.35, "image_size": 32, "num_labels": 10,
                      "initializer_range": 0.3}),  # 0.02 (its default) shrinks the logits to 1e-25: SNR 0 dB
    "vit": ("ViTForImageClassification", "ViTConfig",
            {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
             "image_size": 32, "patch_size": 8, "num_labels": 10}),
    "bert": ("BertForSequenceClassification", "BertConfig",
             {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 64, "max_position_embeddings": 64, "num_labels": 2}),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config",
              {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
               "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64}),
}


def _kws(factory: str) -> Callable[[Path], str]:
    def write(folder: Path) -> str:
        folder.mkdir(parents=True)
        (folder / "kws.py").write_text(KWS)
        return f"{folder / 'kws.py'}:{factory}"

    return write


def _package(folder: Path) -> str:
    for name, text in PACKAGE.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return f"{folder / 'net.py'}:build"


def _hf(name: str) -> Callable[[Path], str]:
    def write(folder: Path) -> str:
        import torch
        import transformers

        architecture, config, kwargs = HF[name]
        torch.manual_seed(0)
        getattr(transformers, architecture)(getattr(transformers, config)(**kwargs)).eval().save_pretrained(folder)
        return str(folder)

    return write


MODELS: dict[str, tuple[str, Callable[[Path], str]]] = {  # name: (the form of --model, what writes it)
    "executorch_lstm": ("module", lambda _folder: "executorch.examples.models.lstm:LSTMModel"),
    # the module form in seconds (the LSTM above takes over a minute per device): a Conv1d(3, 16, 3) over 10 steps
    "executorch_conv1d": ("module", lambda _folder: "executorch.examples.models.toy_model:Conv1dModule"),
    "package": ("package", _package),
    "kws_lstm_gru": ("package", _kws("kws")),
    "kws_lstm_gru_2_steps": ("package", _kws("kws_short")),
    "lstm_tiny": ("package", _kws("lstm_tiny")),
    **{f"hf_{name}": ("hf", _hf(name)) for name in HF},
}
DEVICES = ("raspberry_pi_5", "alif_e8")
_TORCHSR = ("torchsr 1.0.4 (the registry's) imports torchvision, and the registry's torchvision 0.28.0 is a CUDA build "
            "whose operators do not load with torch 2.13.0+cpu (RuntimeError: operator torchvision::nms does not exist)")
SKIPPED: dict[tuple[str, str], str] = {  # seconds for the whole case, measured on 2 busy cores, 2026-12-06
    ("executorch_edsr", "raspberry_pi_5"): _TORCHSR,
    ("executorch_edsr", "alif_e8"): _TORCHSR,
    ("executorch_lstm", "raspberry_pi_5"): "84 s: XNNPACK lowers the quantizable LSTM's unrolled graph (160 ops, 13 "
                                           "delegates) in 22 s, its GQ checkpoint (464 ops) in 40 s; "
                                           "executorch_conv1d runs the module form, kws_lstm_gru_2_steps the cells",
    ("executorch_lstm", "alif_e8"): "100 s: TOSA lowering and Vela of the quantizable LSTM's unrolled cells; "
                                    "executorch_conv1d runs the module form, lstm_tiny the cells",
    ("kws_lstm_gru", "raspberry_pi_5"): "minutes: the INPUT_MODEL lowering alone took 236 s (2139 ops, 151 "
                                        "delegates: every one of the 49 steps unrolled); kws_lstm_gru_2_steps runs",
    ("kws_lstm_gru", "alif_e8"): "over 25 minutes (issue 27): the GQ TOSA/Vela lowering alone stopped at the 600 s "
                                 "time limit; kws_lstm_gru_2_steps runs",
    ("kws_lstm_gru_2_steps", "alif_e8"): "160 s: the Arm quantizer and TOSA lowering of the unrolled cells; lstm_tiny "
                                         "runs an LSTM through them",
    ("lstm_tiny", "raspberry_pi_5"): "kws_lstm_gru_2_steps runs recurrent cells through XNNPACK, and "
                                     "tests/pipeline/test_recurrent_layers.py an LSTM through np run",
    ("hf_mobilenet_v2", "raspberry_pi_5"): "91 s: 17 inverted-residual blocks, lowered float and quantized; "
                                           "tests/test_registries.py lowers one such block with every scheme of "
                                           "both backends, test_architectures.py's cnn_resnet a Hugging Face CNN",
    ("hf_mobilenet_v2", "alif_e8"): "110 s: the same through TOSA and Vela; tests/test_registries.py lowers one "
                                    "inverted-residual block with every Ethos-U scheme, hf_vit a Hugging Face folder",
    ("package", "raspberry_pi_5"): "tests/models/test_model_packages.py runs a three-file package through np run "
                                   "(XNNPACK); sample_cpu's small_cnn the same conv-BN-ReLU blocks through GQ",
    ("hf_vit", "raspberry_pi_5"): "tests/pipeline/test_architectures.py runs it",
    ("hf_bert", "raspberry_pi_5"): "tests/pipeline/test_architectures.py runs it",
    ("hf_qwen2", "raspberry_pi_5"): "tests/pipeline/test_architectures.py runs it",
}
_DETAIL = "detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: 4\n"  # the forms are under test here


@dataclass(frozen=True)
class Case:
    model: str
    device: str

    @property
    def id(self) -> str:
        return f"{self.model}@{self.device}"


CASES = [Case(m, d) for m in [*MODELS, "executorch_edsr"] for d in DEVICES]


def _params(case: Case) -> Any:
    reason = SKIPPED.get((case.model, case.device))
    return pytest.param(case, id=case.id, marks=pytest.mark.skip(reason=reason) if reason else ())


@pytest.mark.parametrize("case", [_params(c) for c in CASES])
def test_zoo_model_runs_on_the_device(case: Case, run_np: Any, tmp_path: Path) -> None:
    from np_optimizer import api

    form, write = MODELS[case.model]
    ws = tmp_path / "ws"
    api.workspace_init(ws)
    started = time.perf_counter()
    created = run_np("projects", "create", "--name", "zoo", "--model", write(tmp_path / "src"), "--device",
                     case.device, "--json", cwd=ws)
    assert created.exit_code == 0, created.stdout + created.stderr
    assert created.json["model"]["kind"] == form
    assert run_np("experiments", "create", "--steps", "gq", "--name", "experiment_01", cwd=ws / "zoo").exit_code == 0
    exp = ws / "zoo" / "experiment_01"
    (exp / "run.detail.yaml").write_text(_DETAIL)
    if case.device == "alif_e8":  # the int8 program is what the NPU runs: a float one lowers a few ops (sample_npu's
        run_yaml = (exp / "run.yaml").read_text()  # INPUT_MODEL rounds test that path), so it is not compiled here
        (exp / "run.yaml").write_text(run_yaml[:run_yaml.index("profile:")] + "profile:\n- GRAPH_QUANTIZE\n")
    ran = run_np("run", "--json", cwd=exp)
    seconds = time.perf_counter() - started
    assert ran.exit_code == 0 and ran.json["status"] == "success", ran.stdout[-3000:] + ran.stderr[-3000:]
    gq = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    assert gq["compile"]["status"] == "ok" and gq["compile"]["pte_bytes"] > 0, gq["compile"]
    snr = gq["fidelity"]["program"]["snr_db"]
    assert isinstance(snr, (int, float)) and math.isfinite(snr) and snr > 5, gq["fidelity"]
    report = run_np("report", "--json", cwd=exp)
    assert report.exit_code == 0, report.stderr
    step = next(s for s in report.json["pipeline"]["steps"] if s["name"] == "01_graph_quantize")
    macs = [m["value"] for m in step["metrics"] if m["metric_type"] == "MACS"]
    assert macs and macs[0] > 0, step["metrics"]
    if case.model.startswith("kws"):  # the recurrent layers counted: 2 frames, hand count per layer
        steps = 2
        hand = 64 * 40 * 3 * steps + 4 * (64 + 128) * 128 * steps + 4 * (128 + 128) * 128 * steps \
            + 3 * (128 + 64) * 64 * steps + 64 * 12
        if case.device == "raspberry_pi_5":  # np's count of the exported graph
            assert macs[0] == hand, (macs, hand)
        else:  # Vela's count of the lowered program (961,312 of 1,096,448 at 4 frames): the decomposed cells, not the formula
            assert 0.8 * hand < macs[0] <= hand, (macs, hand)
    print(f"{case.id}: {seconds:.0f} s, GQ SNR {snr:.1f} dB, {macs[0]:,.0f} MACs, .pte {gq['compile']['pte_bytes']:,} B")
