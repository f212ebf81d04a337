"""Benchmark: the overhead per trial of np sweep's Ray path against the local pool, on a loopback Ray cluster.

The same 4 trials of sample_cpu (small CNN on raspberry_pi_5, MLIA's static figures: GQ scheme W8-A8 /
W8-A8_dynamic x graph optimize on/off) run once through the local pool (--workers SLOTS, each trial a child process)
and once as Ray tasks (as many at once as the cluster has CPUs), each from a cold compile cache and estimate cache of
its own. The cluster is up before the clock starts: by default one head of SLOTS CPUs on this machine, started here;
or an existing one (--address; its nodes' caches are then theirs). Connecting (ray.init and the version check of every
node) is timed apart, once per sweep. Prints both walls and

    overhead per trial = (Ray wall - local wall) / 4            target <= 2 s

and checks the two sweeps recorded the same figures.

    python bench/sweep_ray.py [--slots 2] [--address HOST:PORT]
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
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

SWEEP = """version: "1.0"
base: experiment_01
method: mlia
space:
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic]
  graph_optimize: [true, false]
objectives: [{pte_size: min}, {snr: max}]
strategy: grid
"""


def _sweep(project: Path, pool: Any) -> tuple[float, dict[str, Any]]:
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.workspace import Project

    sweep_file = project / "sweep.yaml"
    run = SweepRun(Project(project), load_sweep(sweep_file), sweep_file, pool.slots, "bench")
    started = time.perf_counter()
    record = run_sweep(run, pool)
    elapsed = time.perf_counter() - started
    failed = [t for t in record.trials if t.state != "complete"]
    if failed:
        raise SystemExit(f"{len(failed)} trial(s) failed in {project}: {failed[0].reason}")
    return elapsed, {json.dumps(t.params, sort_keys=True): t.values for t in record.trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=2, help="local workers, and CPUs of the loopback head")
    parser.add_argument("--address", help="an existing Ray cluster instead of a loopback head started here")
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    from np_optimizer import api
    from np_optimizer.api.trial import WORKER
    from np_optimizer.sweep.pool import LocalPool
    from np_optimizer.sweep.ray_pool import RayPool
    from np_optimizer.workspace import Project

    base = Path(tempfile.mkdtemp(prefix="np-bench-sweep-ray-"))
    cluster = None
    try:
        api.workspace_init(base / "ws")
        (base / "ws" / "sample_cpu" / "sweep.yaml").write_text(SWEEP)
        for name in ("local", "ray"):
            shutil.copytree(base / "ws", base / name)
            for cache in ("estimates", "compiled"):
                (base / f"{name}-{cache}").mkdir()
        address = args.address
        if address is None:
            started = time.perf_counter()
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": args.slots, "include_dashboard": False,
                "env_vars": {"NP_CACHE_DIR": str(base / "ray-estimates"),
                             "NP_COMPILE_CACHE_DIR": str(base / "ray-compiled")}})
            cluster.wait_for_nodes()
            address = cluster.address
            print(f"loopback Ray head with {args.slots} CPUs up in {time.perf_counter() - started:.1f} s (not counted)")

        os.environ.update({"NP_CACHE_DIR": str(base / "local-estimates"),
                           "NP_COMPILE_CACHE_DIR": str(base / "local-compiled")})
        local_wall, local_figures = _sweep(base / "local" / "sample_cpu", LocalPool(args.slots, WORKER))
        print(f"local pool ({args.slots} workers): {local_wall:.1f} s for {len(local_figures)} trials", flush=True)

        started = time.perf_counter()
        pool = RayPool(address, Project(base / "ray" / "sample_cpu"), WORKER)
        connect = time.perf_counter() - started
        ray_wall, ray_figures = _sweep(base / "ray" / "sample_cpu", pool)
        print(f"Ray pool ({pool.slots} slots): {ray_wall:.1f} s for {len(ray_figures)} trials; connect and version "
              f"check {connect:.1f} s before it", flush=True)
        print(f"same figures in both sweeps: {ray_figures == local_figures}")
        trials = len(ray_figures)
        print(f"overhead per trial: ({ray_wall:.1f} s - {local_wall:.1f} s) / {trials} = "
              f"{(ray_wall - local_wall) / trials:.2f} s (target <= 2 s); with the connect: "
              f"{(ray_wall + connect - local_wall) / trials:.2f} s")
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
