"""The sample projects `np workspace init` creates: ready to validate and run, nothing downloaded."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SampleProject", "SAMPLE_PROJECTS"]


@dataclass(frozen=True)
class SampleProject:
    name: str
    model: str
    device: str
    steps: tuple[str, ...]
    description: str


SAMPLE_PROJECTS: tuple[SampleProject, ...] = (
    SampleProject("sample_cpu", "small_cnn", "raspberry_pi_5", ("go", "gq"),
                  "Small residual CNN for a Raspberry Pi 5 (ExecuTorch + XNNPACK)."),
    SampleProject("sample_npu", "small_cnn", "alif_e8", ("go", "gq"),
                  "Small residual CNN for an Alif E8 (ExecuTorch + Ethos-U85-256)."),
    SampleProject("sample_llm", "tiny_llm", "raspberry_pi_5", ("aq", "go", "gq"),
                  "Tiny Llama-style language model for a Raspberry Pi 5: AWQ W4-A8_dynamic, then GO and GQ."),
)
