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
    sweep: str | None = None  # the project's sample sweep.yaml (np sweep)


_SWEEP_HEAD = """# np sweep: every trial is an experiment (experiment_02, ...): experiment_01's run.yaml with one value of each
# line under space. np sweep --dry-run lists the trials; np sweep runs them (Ctrl+C, then np sweep --resume
# continues); np report shows the trials with the Pareto front, np report --html draws it.
version: "1.0"
base: experiment_01
"""

CPU_SWEEP = _SWEEP_HEAD + """space:
  graph_optimize: [true, false]                                # with and without the GO step
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic, W4-A8_dynamic]  # the GQ schemes of XNNPACK
objectives: [{latency: min}, {snr: max}]
constraints: ["snr >= 20"]          # a trial below 20 dB is marked, and the sampler steers away from it
strategy: grid                      # every combination (6); or {optuna: {trials: 4, seed: 0}}
method: mlia                        # each trial's np run: MACs, sizes and SNR (no Raspberry Pi needed)
measure_on: host                    # then its last checkpoint is measured on this machine, a stand-in for the Pi
"""

NPU_SWEEP = _SWEEP_HEAD + """space:
  graph_optimize: [true, false]            # with and without the GO step
  graph_quantize.scheme: [W8-A8, W8-A16]   # the GQ schemes of Ethos-U
objectives: [{latency: min}, {snr: max}]   # latency estimated by MLIA (Vela's performance model)
constraints: ["latency <= 1 ms"]
strategy: grid
method: mlia
"""


SAMPLE_PROJECTS: tuple[SampleProject, ...] = (
    SampleProject("sample_cpu", "small_cnn", "raspberry_pi_5", ("go", "gq"),
                  "Small residual CNN for a Raspberry Pi 5 (ExecuTorch + XNNPACK).", sweep=CPU_SWEEP),
    SampleProject("sample_npu", "small_cnn", "alif_e8", ("go", "gq"),
                  "Small residual CNN for an Alif E8 (ExecuTorch + Ethos-U85-256).", sweep=NPU_SWEEP),
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
