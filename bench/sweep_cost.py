"""Benchmark: what a trial of np sweep costs on the local pool beyond its own work, the old way against the new.

The same sweep runs twice in one go, on copies of one fresh workspace, each from empty estimate and compile caches
of its own, 1 worker:

    cold  a fresh `python -m np_optimizer.api.trial` process per trial (LocalPool(warm=False), as $NP_SWEEP_WARM=0):
          each trial imports torch, ExecuTorch and np's run path again
    warm  every trial a child forked from the pool's warm host, which imported them once (sweep/host.py)

By default the sweep is a 3-trial grid over graph_quantize.scheme (W8-A8, W8-A8_dynamic, W4-A8_dynamic) on the
built-in sample_cpu model, estimated only (method mlia, no measurement); --grid sample_cpu runs the workspace's own
sample_cpu sweep.yaml (6 trials, each measured on this machine). Prints, per way: the sweep's wall time, each trial's
wall time (from the driver handing it to the pool to its result), the time its steps and profiling took (the
experiment's own records: each job.json's duration_s, each profiling, evaluation and post-hoc round's (the
measurement on measure_on) start to end in report.json) and

    per-trial overhead = trial wall time - its steps' and profiling time      (issue 36's target: at most 1 s)

(the mean, and the mean after the first trial, whose wall holds the warm host's one import), and whether both ways
recorded the same figures. The overhead understates the cold way's cost: a fresh process imports ExecuTorch's lowering
and runtime inside its first step, so part of its imports counts as step time; compare the walls too.

    python bench/sweep_cost.py [--grid scheme|sample_cpu] [--only cold|warm]
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
from datetime import datetime  # noqa: E402
from typing import Any  # noqa: E402

SCHEME_SWEEP = """version: "1.0"
base: experiment_01
space:
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic, W4-A8_dynamic]
objectives: [{pte_size: min}, {snr: max}]
strategy: grid
method: mlia
"""

MEASURED = {"LATENCY", "MEMORY", "PEAK_MEMORY"}  # measured on this machine: not the same twice, left out of the check


def _own_time(experiment: Path) -> float:
    """The seconds the experiment's steps and profiling rounds took, by its own records."""
    steps = sum(float(json.loads(job.read_text()).get("duration_s") or 0) for job in experiment.glob("*/job.json"))
    report = json.loads((experiment / "report.json").read_text())
    rounds = 0.0
    results = [*((report.get("profile") or {}).get("results") or []), *(report.get("post_hoc") or []),
               *((report.get("evaluation") or {}).get("results") or [])]  # post_hoc: the measurement on measure_on
    for result in results:
        if result.get("started_at") and result.get("ended_at"):
            rounds += (datetime.fromisoformat(result["ended_at"]) -
                       datetime.fromisoformat(result["started_at"])).total_seconds()
    return steps + rounds


def _sweep(project: Path, warm: bool, caches: Path) -> dict[str, Any]:
    from np_optimizer.api.trial import WORKER
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.sweep.pool import LocalPool
    from np_optimizer.workspace import Project

    for cache in ("estimates", "compiled"):
        (caches / cache).mkdir(parents=True)
    os.environ.update({"NP_CACHE_DIR": str(caches / "estimates"), "NP_COMPILE_CACHE_DIR": str(caches / "compiled")})
    sweep_file = project / "sweep.yaml"
    pool = LocalPool(1, WORKER, warm=warm)
    run = SweepRun(Project(project), load_sweep(sweep_file), sweep_file, 1, "bench")
    began: dict[int, float] = {}
    walls: dict[str, float] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["kind"] == "trial_start":
            began[event["number"]] = time.perf_counter()
        elif event["kind"] == "trial_done":
            walls[event["experiment"]] = time.perf_counter() - began[event["number"]]

    started = time.perf_counter()
    record = run_sweep(run, pool, on_event)
    wall = time.perf_counter() - started
    failed = [t for t in record.trials if t.state != "complete"]
    if failed:
        raise SystemExit(f"{len(failed)} trial(s) failed in {project}: {failed[0].reason}")
    trials = [(name, wall_s, _own_time(project / name)) for name, wall_s in sorted(walls.items())]
    return {"wall": wall, "trials": trials, "host_s": pool.host.ready_s if pool.host is not None else None,
            "figures": {json.dumps(t.params, sort_keys=True): {k: v for k, v in t.values.items() if k not in MEASURED}
                        for t in record.trials}}


def _print(way: str, got: dict[str, Any]) -> float:
    trials = got["trials"]
    overheads = [wall - own for _name, wall, own in trials]
    host = got["host_s"]
    print(f"\n{way}: {got['wall']:.1f} s for {len(trials)} trials"
          f"{' (a fresh process per trial)' if host is None else f'; the warm host imported in {host:.1f} s, once, within the first trial'}")
    print(f"  {'trial':<15}{'wall s':>8}{'steps+profiling s':>19}{'overhead s':>12}")
    for (name, wall, own), overhead in zip(trials, overheads, strict=True):
        print(f"  {name:<15}{wall:>8.2f}{own:>19.2f}{overhead:>12.2f}")
    mean = sum(overheads) / len(overheads)
    later = overheads[1:] or overheads
    print(f"  per-trial overhead: mean {mean:.2f} s, after the first trial {sum(later) / len(later):.2f} s "
          f"(target <= 1 s); mean trial wall {sum(t[1] for t in trials) / len(trials):.2f} s")
    if host is not None:
        print(f"  the first trial's overhead without the host's one import: {overheads[0] - host:.2f} s")
    return mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=["scheme", "sample_cpu"], default="scheme",
                        help="scheme: 3 trials, estimate only (default); sample_cpu: its 6 trials, measured here")
    parser.add_argument("--only", choices=["cold", "warm"], help="run one way only")
    args = parser.parse_args()
    from np_optimizer import api

    # the page cache holds the libraries before either way starts, so neither pays the first read from disk
    subprocess.run([sys.executable, "-c", "import torch, executorch.exir"], capture_output=True, check=False)
    base = Path(tempfile.mkdtemp(prefix="np-bench-sweep-cost-"))
    try:
        api.workspace_init(base / "ws")
        if args.grid == "scheme":
            (base / "ws" / "sample_cpu" / "sweep.yaml").write_text(SCHEME_SWEEP)
        got: dict[str, dict[str, Any]] = {}
        for way in ("cold", "warm"):
            if args.only and way != args.only:
                continue
            shutil.copytree(base / "ws", base / way)
            got[way] = _sweep(base / way / "sample_cpu", way == "warm", base / f"{way}-caches")
        means = {way: _print(way, value) for way, value in got.items()}
        if len(got) == 2:
            cold, warm = got["cold"], got["warm"]
            print(f"\nwarm against cold: sweep wall {cold['wall']:.1f} s -> {warm['wall']:.1f} s "
                  f"({cold['wall'] / warm['wall']:.2f}x faster); per-trial overhead {means['cold']:.2f} s -> "
                  f"{means['warm']:.2f} s")
            print(f"same figures both ways (measured ones aside): {cold['figures'] == warm['figures']}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
