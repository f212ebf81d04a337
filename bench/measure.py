"""Benchmark of np's measured (on-device) method on this machine, in one run on the same .pte files:

1. np's measured median (the on-device method's local path: a fresh subprocess per measurement, the device queue,
   the measuring script) against a bare ExecuTorch runtime loop written here (Runtime -> load_program ->
   load_method -> execute, each call timed with perf_counter_ns), run just before and just after np's measurement.
   Ratio np / mean(bare before, bare after) per round; target: within 5 %. bare after / bare before shows how much
   this machine moves by itself between two identical measurements (the noise floor).
2. The int8 (W8-A8) against fp32 speed-up of the sample small_cnn on the host.

Both .pte files are built with np's own modules (export, PT2E quantization, XNNPACK compile). The rounds alternate
the model order; on a shared machine compare the ratios, not the absolute figures.

    python bench/measure.py [--rounds 8] [--runs 500] [--warmup 10] [--out DIR]
"""

from __future__ import annotations

import os
import sys

# Run as `python bench/measure.py`, Python puts bench/ first on sys.path, and bench/profile.py there would shadow the
# standard library's `profile` (torch imports cProfile, which imports it). Drop that entry before importing anything.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

TARGET = 0.05


def build(out: Path, log_file: Path) -> dict[str, tuple[Path, Any]]:
    """small_cnn compiled for host, fp32 and W8-A8: {name: (compiled folder, CompileResult)}."""
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.logs import quiet_native_output
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    built = {}
    with quiet_native_output(log_file), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, example = build_builtin("small_cnn")
        program = export_model(model, example)
        int8 = quantize_program(export_model(model, example), backend="xnnpack", scheme="W8-A8", target=None,
                                calibration=[example])
        for name, prog in (("fp32", program), ("int8", int8)):
            path = save_program(prog, out / f"small_cnn_{name}.pt2")
            compiled = compile_checkpoint(path, get_device("host"), out / f"compiled_{name}")
            assert compiled.status == "ok", compiled.reason
            built[name] = (out / f"compiled_{name}", compiled)
    return built


def np_median(name: str, folder: Path, compiled: Any, out: Path, runs: int, warmup: int) -> tuple[float, float]:
    """(median ms, CoV) measured by the on-device method's local path."""
    from np_optimizer.devices import get_device
    from np_optimizer.profiler.methods import get_method
    from np_optimizer.profiler.request import ProfileRequest

    work = out / "np" / f"{name}-{time.time_ns()}"
    request = ProfileRequest(checkpoint=name.upper(), job="bench", program_path=out / f"small_cnn_{name}.pt2",
                             program_sha256="", compiled=compiled, compiled_dir=folder, device=get_device("host"),
                             options={"num_executions": runs, "warmup": warmup, "timeout": 120}, work_dir=work,
                             log=logging.getLogger("np.Bench"))
    output = get_method("on-device").profile(request)  # a failure raises an np error with code and hint
    if output.partial:
        raise SystemExit(f"np measurement was partial: {output.warnings}")
    latency = output.extras["latency_ms"]
    return float(latency["median"]), float(latency["cov"])


def bare_median(pte: Path, runs: int, warmup: int, log_file: Path) -> tuple[float, float]:
    """(median ms, CoV) of a bare runtime loop in this process: the reference np's figure is compared with."""
    import torch
    from executorch.runtime import Runtime

    from np_optimizer.logs import quiet_native_output

    with quiet_native_output(log_file):  # the runtime's cpuinfo lines
        method = Runtime.get().load_program(pte).load_method("forward")
    assert method is not None
    torch.manual_seed(0)
    shape = method.metadata.input_tensor_meta(0).sizes()
    inputs = [torch.randn(*shape)]
    for _ in range(warmup):
        method.execute(inputs)
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        method.execute(inputs)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    mean = statistics.mean(samples)
    return statistics.median(samples), statistics.stdev(samples) / mean


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--runs", type=int, default=500, help="timed runs per measurement")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="keep the .pte files and raw samples here")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="np-bench-measure-"))
    out.mkdir(parents=True, exist_ok=True)
    log_file = out / "bench.log"
    logging.getLogger("np").addHandler(logging.FileHandler(log_file))
    logging.getLogger("np").propagate = False
    print(f"building small_cnn fp32 and W8-A8 for host (np modules) in {out} ...", flush=True)
    start = time.monotonic()
    built = build(out, log_file)
    sizes = {n: c.pte_bytes for n, (_, c) in built.items()}
    print(f"  built in {time.monotonic() - start:.1f} s: fp32 {sizes['fp32']:,} B, int8 {sizes['int8']:,} B .pte",
          flush=True)

    # Per round and model: bare, np, bare. np's figure is compared with the mean of the two bare loops around it,
    # which cancels a linear drift of the machine's load; bare-after / bare-before is the noise floor of this machine.
    names = ("fp32", "int8")
    rows: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for index in range(args.rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            folder, compiled = built[name]
            pte = folder / str(compiled.pte_file)
            before = bare_median(pte, args.runs, args.warmup, log_file)
            measured = np_median(name, folder, compiled, out, args.runs, args.warmup)
            after = bare_median(pte, args.runs, args.warmup, log_file)
            bare = (before[0] + after[0]) / 2
            row = {"np": measured[0], "np_cov": measured[1], "bare": bare, "bare_cov": (before[1] + after[1]) / 2,
                   "ratio": measured[0] / bare, "noise": after[0] / before[0]}
            rows[name].append(row)
            print(f"  round {index + 1}/{args.rounds} {name}: np {row['np']:.4f} ms, bare {before[0]:.4f} / "
                  f"{after[0]:.4f} ms (before / after), np/bare {row['ratio']:.3f}", flush=True)

    def col(name: str, key: str) -> list[float]:
        return [r[key] for r in rows[name]]

    print()
    print(f"small_cnn on host, {args.rounds} rounds x {args.runs} timed runs per measurement ({args.warmup} warm-up); "
          "medians over rounds, in ms")
    header = (f"{'model':<6} {'np median':>10} {'np range':>13} {'np CoV':>7} {'bare median':>12} {'bare range':>13} "
              f"{'bare CoV':>9} {'np/bare':>8} {'np/bare range':>14} {'bare/bare range':>16}")
    print(header)
    print("-" * len(header))
    for name in names:
        med = statistics.median
        print(f"{name:<6} {med(col(name, 'np')):>10.4f} {spread(col(name, 'np')):>13} "
              f"{med(col(name, 'np_cov')) * 100:>6.1f}% {med(col(name, 'bare')):>12.4f} "
              f"{spread(col(name, 'bare')):>13} "
              f"{med(col(name, 'bare_cov')) * 100:>8.1f}% {med(col(name, 'ratio')):>8.3f} "
              f"{spread(col(name, 'ratio')):>14} {spread(col(name, 'noise')):>16}")
    print()
    for name in names:
        ratio = statistics.median(col(name, "ratio"))
        verdict = "within" if abs(ratio - 1) <= TARGET else "OUTSIDE"
        noise = statistics.median(abs(x - 1) for x in col(name, "noise"))
        print(f"np / bare, {name}: {ratio:.3f} (median of {args.rounds} per-round ratios) -> {verdict} the "
              f"{TARGET:.0%} target; the bare loop against itself moved by {noise:.1%} (median) between two runs")
    np_up = [f / i for f, i in zip(col("fp32", "np"), col("int8", "np"), strict=True)]
    bare_up = [f / i for f, i in zip(col("fp32", "bare"), col("int8", "bare"), strict=True)]
    print(f"int8 (W8-A8) vs fp32 speed-up on host: {statistics.median(np_up):.2f}x by np "
          f"(rounds {min(np_up):.2f}-{max(np_up):.2f}), {statistics.median(bare_up):.2f}x by the bare loop "
          f"(rounds {min(bare_up):.2f}-{max(bare_up):.2f})")
    print(f"raw samples of np's measurements: {out / 'np'}/*/measurement.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
