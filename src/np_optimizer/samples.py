"""The sample projects `np workspace init` creates: ready to validate and run, nothing downloaded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["SampleProject", "SAMPLE_PROJECTS", "SAMPLE_DATA"]

SAMPLE_DATA = Path(__file__).parent / "sample_data"  # files of samples that are not built-in models


@dataclass(frozen=True)
class SampleProject:
    name: str
    model: str
    device: str
    steps: tuple[str, ...]
    description: str
    evaluation_dataset: str | None = None  # a .npz in SAMPLE_DATA (inputs, labels)
    calibration: str | None = None  # a .npz in SAMPLE_DATA (inputs), written as one .npy per sample
    evaluate: tuple[str, ...] = ()  # run.yaml `evaluate:` lines added to experiment_01


SAMPLE_PROJECTS: tuple[SampleProject, ...] = (
    SampleProject("sample_cpu", "small_cnn", "raspberry_pi_5", ("go", "gq"),
                  "Small residual CNN for a Raspberry Pi 5 (ExecuTorch + XNNPACK)."),
    SampleProject("sample_npu", "small_cnn", "alif_e8", ("go", "gq"),
                  "Small residual CNN for an Alif E8 (ExecuTorch + Ethos-U85-256)."),
    SampleProject("sample_llm", "tiny_llm", "raspberry_pi_5", ("aq", "go", "gq"),
                  "Tiny Llama-style language model for a Raspberry Pi 5: AWQ W4-A8_dynamic, then GO and GQ."),
    SampleProject("sample_digits", str(SAMPLE_DATA / "digits.pt2"), "host", ("go", "gq"),
                  "CNN trained on scikit-learn's 8x8 digits, with its 360-image validation split, measured on this "
                  "machine (ExecuTorch + XNNPACK): TOP1 accuracy next to measured latency for each checkpoint.",
                  evaluation_dataset="digits_val.npz", calibration="digits_calibration.npz",
                  evaluate=("- model: INPUT_MODEL", "  metrics: [TOP1_ACCURACY, SNR]",
                            "- model: GRAPH_OPTIMIZE", "  metrics: [TOP1_ACCURACY, SNR]",
                            "- model: GRAPH_QUANTIZE", "  metrics: [TOP1_ACCURACY, SNR, KLD]")),
)
