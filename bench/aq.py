"""Benchmark: advanced_quantize's algorithms on the sample language model, each beside RTN.

For every algorithm (RTN, AWQ, GPTQ, SMOOTHQUANT, AUTOROUND) at one scheme (default W4-A8_dynamic) and for two models
— `tiny_llm` (the sample) and the same function built with activation outliers (4 input channels of every
norm-fed Linear x64, their weights /64: the case AWQ and SmoothQuant exist for) — it prints the logits' SNR against
the float model (INPUT_MODEL) on held-out text, for the eager quantized model and for its XNNPACK .pte run on this
machine's ExecuTorch runtime, the .pte size, and the SNR difference to RTN. Calibration: the built-in text minus
its last 8 windows, which (with the example input) are the evaluation set.

    .venv/bin/python bench/aq.py [--scheme W4-A8_dynamic|W8-A8|W8-A8_dynamic|all] [--no-pte]
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _common  # noqa: E402,F401  (keeps bench/profile.py from shadowing the stdlib's profile)

ALGORITHMS = ("RTN", "AWQ", "GPTQ", "SMOOTHQUANT", "AUTOROUND")
SCHEMES = ("W4-A8_dynamic", "W8-A8_dynamic", "W8-A8")
HELD_OUT = 8


def _options() -> dict:
    from np_optimizer.config.detail_config import DetailConfig

    return DetailConfig().step_options("advanced_quantize")


def _lower(model, example, work: Path, name: str) -> tuple[Path | None, int | None]:
    import torch

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import save_program

    program = torch.export.export(model, example)
    path = save_program(program, work / f"{name}.pt2")
    result = compile_checkpoint(path, get_device("raspberry_pi_5"), work / f"{name}_pte")
    if result.status != "ok" or not result.pte_file:
        print(f"  lowering {name}: {result.status} {result.reason}")
        return None, None
    return work / f"{name}_pte" / result.pte_file, result.pte_bytes


def _snr(reference: list, outputs: list) -> float:
    from np_optimizer.fidelity import snr_db

    return snr_db(reference, outputs)


def bench_model(label: str, build, scheme: str, lower: bool, work: Path) -> None:
    import torch

    from np_optimizer.adapters.executorch_runtime import run_pte
    from np_optimizer.models.llm import calibration_samples
    from np_optimizer.quantize.aq import quantize_model

    base, example = build()
    windows = calibration_samples()
    calibration, held_out = windows[:-HELD_OUT], windows[-HELD_OUT:]
    evaluation = [example, *held_out]
    with torch.no_grad():
        reference = [base(*x) for x in evaluation]
    float_pte = None
    if lower:
        _pte, float_pte = _lower(base, example, work, f"{label}_float")
    print(f"\n{label}: {scheme}, calibrated on {len(calibration)} windows of 32 bytes, evaluated on the example "
          f"input + {len(held_out)} held-out windows" + (f"; float .pte {float_pte:,} B" if float_pte else ""))
    print(f"{'algorithm':<12} {'SNR dB (eager)':>15} {'vs RTN':>8} {'SNR dB (.pte)':>14} {'.pte B':>10} "
          f"{'quantize s':>11}")
    rtn_snr = None
    for algorithm in ALGORITHMS:
        model = copy.deepcopy(base)
        start = time.perf_counter()
        quantize_model(model, algorithm=algorithm, scheme=scheme, options=_options(), calibration=calibration)
        seconds = time.perf_counter() - start
        with torch.no_grad():
            eager = _snr(reference, [model(*x) for x in evaluation])
        rtn_snr = eager if algorithm == "RTN" else rtn_snr
        delta = "" if algorithm == "RTN" else f"{eager - rtn_snr:+.2f}"
        pte_snr, pte_bytes = "", ""
        if lower:
            pte, size = _lower(model, example, work, f"{label}_{algorithm}")
            if pte is not None:
                pte_snr = f"{_snr(reference, [tuple(run_pte(pte, x)) for x in evaluation]):.2f}"
                pte_bytes = f"{size:,}"
        print(f"{algorithm:<12} {eager:>15.2f} {delta:>8} {pte_snr:>14} {pte_bytes:>10} {seconds:>11.1f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="W4-A8_dynamic", choices=(*SCHEMES, "all"))
    parser.add_argument("--no-pte", action="store_true", help="skip lowering and the .pte columns (faster)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from np_optimizer.models.llm import build_tiny_llm

    models = (("tiny_llm", lambda: build_tiny_llm(0)),
              ("tiny_llm+outliers", lambda: build_tiny_llm(0, outlier_channels=4, outlier_scale=64.0)))
    schemes = SCHEMES if args.scheme == "all" else (args.scheme,)
    with tempfile.TemporaryDirectory(prefix="np-bench-aq-") as tmp:
        for scheme in schemes:
            for label, build in models:
                bench_model(label, build, scheme, not args.no_pte, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
