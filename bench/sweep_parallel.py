"""Benchmark: parallel efficiency of np sweep's local pool on this machine, for estimated trials.

Six trials of sample_npu (alif_e8, MLIA estimates: GQ scheme W8-A8 / W8-A16 x calibration samples 16, 24, 32) run
once with --workers 1 and once with --workers 2, each from a cold compile cache and estimate cache of its own, so
neither run reuses the other's work. Prints both wall times and the efficiency

    serial time / (workers x parallel time)          target >= 0.8 on this 2-core machine

and checks the two sweeps recorded the same figures (estimates are deterministic).

    python bench/sweep_parallel.py [--workers 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SWEEP = """version: "1.0"
space:
  graph_quantize.scheme: [W8-A8, W8-A16]
  graph_quantize.calibration.num_samples: [16, 24, 32]
objectives: [{latency: min}, {snr: max}]
"""


def _sweep(project: Path, workers: int, caches: Path) -> tuple[float, dict[str, object]]:
    env = {**os.environ, "NP_CACHE_DIR": str(caches / "estimates"), "NP_COMPILE_CACHE_DIR": str(caches / "compiled"),
           "NP_QUEUE_DIR": str(caches / "queue")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", "sweep", "--quiet", "--workers", str(workers)],
                          cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"np sweep --workers {workers} failed:\n{proc.stderr}")
    record = json.loads((project / "sweep" / "trials.json").read_text())
    figures = {json.dumps(t["params"], sort_keys=True): t["values"] for t in record["trials"]}
    return elapsed, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from np_optimizer import api

    base = Path(tempfile.mkdtemp(prefix="np-bench-sweep-"))
    try:
        api.workspace_init(base / "ws")
        project = base / "ws" / "sample_npu"
        (project / "sweep.yaml").write_text(SWEEP)
        runs = {}
        for workers in (1, args.workers):
            copy = base / f"workers{workers}"
            shutil.copytree(project, copy)
            runs[workers] = _sweep(copy, workers, base / f"caches{workers}")
            print(f"{workers} worker(s): {runs[workers][0]:.1f} s for {len(runs[workers][1])} trials", flush=True)
        serial, parallel = runs[1][0], runs[args.workers][0]
        same = runs[1][1] == runs[args.workers][1]
        print(f"same figures in both sweeps: {same}")
        efficiency = serial / (args.workers * parallel)
        print(f"parallel efficiency: {serial:.1f} s / ({args.workers} x {parallel:.1f} s) = {efficiency:.2f} "
              f"(target >= 0.8; {os.cpu_count()} cores)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
