"""Benchmark: the cost of an mlia estimate through np profile, measured side by side in one run.

1. uncached `np profile --force` of a compiled checkpoint against `mlia check --performance` on the same .tosa
   (both as fresh processes, alternated, several rounds; ratio of median wall times);
2. a cached `np profile` (the estimate reused) against the uncached one.

    .venv/bin/python bench/profile.py [rounds]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import np_command, spread, timed, workspace  # noqa: E402  (also unshadows the stdlib's profile)


def main() -> int:
    from np_optimizer import api

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    root = workspace()
    api.projects_create(name="bench_npu", model="small_cnn", device="alif_e8", cwd=root)
    exp = Path(api.experiments_create(steps="gq", project="bench_npu", cwd=root).path)
    (exp / "run.yaml").write_text('version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n')
    api.run(experiment=str(exp))  # compiles GRAPH_QUANTIZE for alif_e8 (no profile section: nothing estimated yet)
    compile_record = json.loads((exp / "01_graph_quantize" / "artifacts" / "compiled_alif_e8" / "compile.json")
                                .read_text())
    tosa = exp / "01_graph_quantize" / "artifacts" / "compiled_alif_e8" / compile_record["tosa_file"]
    mlia = [str(Path(sys.executable).with_name("mlia")), "check", str(tosa), "--target-profile", "ethos-u85-256",
            "--backend", "vela", "--performance", "--json"]
    np_uncached = np_command("profile", "graph_quantize", "--force")
    np_cached = np_command("profile", "graph_quantize")
    times: dict[str, list[float]] = {"np profile (uncached)": [], "mlia check": [], "np profile (cached)": []}
    timed(np_uncached, exp)  # warm-up: page cache, .pyc files
    for index in range(rounds):
        out_dir = root.parent / f"mlia-out-{index}"
        times["np profile (uncached)"].append(timed(np_uncached, exp))
        times["mlia check"].append(timed([*mlia, "--output-dir", str(out_dir)], exp))
        times["np profile (cached)"].append(timed(np_cached, exp))
    print(f"Estimate of 01_graph_quantize (small_cnn, W8-A8) on alif_e8 / ethos-u85-256, {rounds} alternated rounds, "
          "each a fresh process (wall time: median [min..max]):")
    for name, samples in times.items():
        print(f"  {name:<24} {spread(samples)}")
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"np profile (uncached) / mlia check      = {median['np profile (uncached)'] / median['mlia check']:.2f}")
    print(f"np profile (cached)   / np profile (uncached) = "
          f"{median['np profile (cached)'] / median['np profile (uncached)']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
