"""Benchmark: what a sweep costs on the local pool, the old way against the new (issue 36, item 4), 1 worker.

Each sweep runs twice in one go, on copies of one fresh workspace:

    old  a fresh `python -m np_optimizer.api.trial` process per trial (LocalPool(warm=False), as $NP_SWEEP_WARM=0),
         each trial with empty caches of its own (step, reference, compile and estimate caches: nothing reused
         across trials; a compile reused inside a trial stays, as before item 2), each trial starting its own
         measuring process
    new  every trial a child forked from the pool's warm host (sweep/host.py: started with the pool, primed before its
         first fork), the caches shared by the sweep (empty at its start), one warm measuring process for the sweep
         (profiler/measure/warm.py, SHARED_ENV)

The sweeps (--sweeps picks some):

    sample_cpu  the workspace's own sweep.yaml: 6 trials (GO on/off x 3 GQ schemes), each measured on this machine
    sample_npu  the workspace's own sweep.yaml: 4 trials (GO on/off x 2 GQ schemes), Ethos-U, estimated by MLIA
    vit         6 trials on a Hugging Face ViT saved from a small config (random weights, no download): 2 GQ schemes x
                3 calibration sizes on raspberry_pi_5, GRAPH_QUANTIZE profiled by MLIA; its INPUT_MODEL and
                GRAPH_OPTIMIZE are the same in every trial

How each figure is measured (printed with it):

    wall             the sweep: time.perf_counter around run_sweep; a trial: from the driver's trial_start event
                     (before the pool starts it) to its trial_done event (its result read)
    CPU s            user + system seconds of the bench's process and every process of the sweep (getrusage of
                     this process and of the children it waited for: the pool, the warm host, the measuring
                     process and the trials, each reaped by its parent), from before the pool to after its close:
                     less at the mercy of the other users of a shared machine than the wall
    steps            the experiment's own records: the sum of each job.json's duration_s (a reused job's is its copy)
    profiling        report.json: each profiling, evaluation and post-hoc round's (the measurement on measure_on)
                     started_at to ended_at
    overhead         trial wall - steps - profiling: the process, imports, np run's set-up, the trial's own work
    unique steps     one computation of each distinct step (its config_hash and input checkpoint), summed over the
                     sweep: the work no cache can save (the first computation's duration_s; the old way's include
                     the imports a fresh process pays inside its first step). old wall / the new way's unique
                     steps is the most any reuse could give: the speed-up with no overhead and no profiling at all
    same figures     each trial's recorded figures (SNR, sizes, MACs, ...) and the sha256 of each .pte it compiled,
                     by its parameters, equal both ways;
                     LATENCY and MEMORY are measured on this machine and differ run to run: left out of the check

The old way's overhead understates its cost: a fresh process imports ExecuTorch's lowering and runtime inside its
first step, so part of its imports counts as step time; compare the walls too. All caches live in a temporary folder
(XDG_CACHE_HOME too); nothing of the user's ~/.cache is read or written.

    python bench/sweep_cost.py [--sweeps sample_cpu,sample_npu,vit] [--only old|new]

Measured (`--sweeps sample_cpu`, the shared 2-core machine; load average: 1-minute, lowest to highest during the run).
Earlier rounds: 2.47x, then with the warm host tracing ExecuTorch's patterns once (backends/traced_once.py, after it
forked the first trial) 1.45x to 2.15x, CPU 161 -> 80 s (2.01x); the first trial took 49 s of it (its three steps 37 s,
tracing the patterns itself while the host traced the same beside it; the host's imports 10 s). Since then:

- the host starts with the pool (its imports overlap the sweep's set-up) and primes before its first fork, so the
  first trial starts with the patterns traced and no trial traces them again: that trial now 22 to 33 s, of which
  10.7 to 15.6 s waiting for the host's imports (6.4 to 7.7 s) and its prime, and 11 to 17 s of steps;
- INPUT_MODEL's run on the evaluation inputs (the fidelities' reference) comes from the reference cache
  (pipeline/reference_cache.py) in every trial after the first: it cost 0.4 to 0.9 s a trial (cProfile of a later
  trial: loading INPUT_MODEL and running it on the evaluation inputs), in its GRAPH_QUANTIZE;
- the old way's trials each have an empty reference cache too (it lives in their step cache's folder).

Three runs of this code (sample_cpu), the same figures both ways in each:

    load       old wall   new wall   wall ratio (at most)   CPU s old -> new   overhead after the 1st trial
    2.4-3.6    181.6 s     56.3 s    3.22x (4.87x)          134 -> 55, 2.45x   0.36 s
    2.8-5.0    215.0 s     79.8 s    2.70x (3.97x)          153 -> 59, 2.58x   0.47 s
    2.7-3.2    164.4 s     72.1 s    2.28x (3.39x)          142 -> 66, 2.16x   0.37 s

Not met reliably: 3x (once 3.22x; the CPU ratio, steadier under the other users' load, 2.16x to 2.58x). What is
left of the new way is the work no cache can save across different schemes: each trial after the first took 4 to
12 s, nearly all its GRAPH_QUANTIZE (ExecuTorch's quantizing, 1 to 4 s, and XNNPACK lowering, 4 to 9 s, of a program
no other trial has), its fidelity (the program and the .pte on the evaluation inputs, about 1 s) and its measurement
on this machine (0.6 to 1 s, of its own .pte); the first trial also pays the imports and the patterns once. The old
way's 6 trials repeat those imports and traces in every trial (each 20 to 43 s).

On a quiet machine (2026-12-07 18:49, main at 2b8d6a9, load 0.9 to 1.1, nothing else running), after the lowering's
upstream waste was cut (adapters/: CIA ops materialized once, typing's Callable, XNNPACK without the edge IR check)
and np run stopped making an ETRecord, which made both ways faster: old 80.6 s (82.5 CPU s), new 31.3 s (32.8 CPU s),
2.57x (CPU 2.51x; at most 4.78x), the same figures. The new way's first trial took 14.9 s, 8.7 s of it waiting for
the warm host's imports (4.5 s) and its prime; the later trials 2.6 to 3.8 s (steps 1.8 to 3.1 s, profiling 0.56 s,
overhead 0.18 to 0.21 s); each old-way trial 11.8 to 15.5 s.

Since then (each change checked by this bench's "same figures", which now compares every .pte's sha256 too):

- the host rehearses the compile after its first fork, beside that trial (compile/rehearsal.py: a small CNN quantized
  in each scheme and lowered), so the later trials find torch's and ExecuTorch's first-call work done (0.3 to 0.6 s
  a trial); a measurement on this machine waits for the rehearsal to end (busy.py);
- the host exits without the interpreter's teardown (1.5 s at every sweep's end);
- a measurement on this machine takes 0.2 s instead of 0.5 (the measuring zygote tells a worker's end at once and
  freezes its imports for the collector): profiling 0.56 -> 0.23 s a trial, and 1.7 -> 1.4 s in the old way's;
- a lowering generates a graph module's Python code only when it is used (adapters/torch_private.deferred_codegen):
  a lowering 10 to 19% faster, both ways (bench/lowering.py: the median ratio 0.81 to 0.90 on small_cnn's programs);
- the host traces XNNPACK's patterns as the compile does (under lean_lowering: 4.2 -> 3.4 s) and imports and primes
  with the collector off (warm + prime 7.8 -> 6.0 s), so the first trial waits 6.0 s for it instead of 8.7.

Three runs of this code (2026-12-07 21:17 to 21:22, main at f25a50a, load 1.0 to 1.1, nothing else running):

    old wall   new wall   wall ratio (at most)   CPU s old -> new   first trial (waiting for the host)   later trials
    68.3 s     20.7 s     3.29x (5.60x)          68 -> 26, 2.62x    10.6 s (6.0 s)                       1.7 to 2.7 s
    71.9 s     21.3 s     3.37x (5.80x)          75 -> 28, 2.67x
    67.5 s     21.7 s     3.11x (5.27x)          70 -> 28, 2.48x

Met: at least 3x, the same figures and .pte bytes both ways. The overhead of a trial after the first: 0.17 to 0.20 s;
the mean over the six, the first trial's wait for the host included, 1.15 to 1.21 s. A later trial is now its
GRAPH_QUANTIZE (quantizing 0.2 to 0.6 s, lowering 1.0 to 2.0 s), 0.23 s of measuring and 0.18 s of the rest. With
lowering 15 to 20% faster both ways (deferred_codegen) the ratio stayed where it was (2.93x to 2.99x over three runs
before the host's collector and lean traces): the old way lowers 15 programs to the new way's 8, so a faster lowering
helps it as much; what raised the ratio was the new way's own wait for the host.

sample_npu (4 trials, Ethos-U, MLIA's estimates), once, load 3.7 to 4.6, at 2b8d6a9: old 142.8 s, new 91.2 s, 1.57x
(at most 2.83x), CPU 97 -> 64 s (1.52x); its first trial's profiling took 21.8 s there. Once more at f25a50a (21:38,
load 0.8 to 1.1): old 70.9 s, new 29.7 s, 2.39x (at most 4.82x), CPU 71 -> 31 s (2.27x), the same figures; the new
way's first trial profiled for 9.1 s, as the old way's first two (8.7 and 8.9 s), and each later trial took 3.4 to 3.8
s, nearly all its GRAPH_QUANTIZE (TOSA lowering and Vela). The rehearsal is XNNPACK's only.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime  # noqa: E402
from typing import Any  # noqa: E402

SWEEPS = ("sample_cpu", "sample_npu", "vit")
VIT_CONFIG = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
              "image_size": 32, "patch_size": 8, "num_labels": 10}  # tests/models/test_zoo.py's
VIT_SWEEP = """version: "1.0"
base: experiment_01
space:
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic]
  graph_quantize.calibration.num_samples: [4, 8, 16]
objectives: [{pte_size: min}, {snr: max}]
strategy: grid
method: mlia
"""
VIT_RUN = """version: "1.0"
steps:
- graph_optimize: null
- graph_quantize:
  - scheme: W8-A8
profile:
- GRAPH_QUANTIZE
"""
MEASURED = {"LATENCY", "MEMORY", "PEAK_MEMORY"}  # measured on this machine: not the same twice, left out of the check


def _cache_env(folder: Path) -> dict[str, str]:
    return {"NP_CACHE_DIR": str(folder / "estimates"), "NP_COMPILE_CACHE_DIR": str(folder / "compiled"),
            "NP_STEP_CACHE_DIR": str(folder / "steps")}


def _rounds(experiment: Path) -> float:
    """The seconds the experiment's profiling, evaluation and post-hoc rounds took, by report.json."""
    report = json.loads((experiment / "report.json").read_text())
    seconds = 0.0
    for result in [*((report.get("profile") or {}).get("results") or []), *(report.get("post_hoc") or []),
                   *((report.get("evaluation") or {}).get("results") or [])]:
        if result.get("started_at") and result.get("ended_at"):
            seconds += (datetime.fromisoformat(result["ended_at"]) -
                        datetime.fromisoformat(result["started_at"])).total_seconds()
    return seconds


def _jobs(experiment: Path) -> list[dict[str, Any]]:
    return [json.loads(job.read_text()) for job in sorted(experiment.glob("*/job.json"))]


def _pte_sha256(experiment: Path) -> list[str | None]:
    """The sha256 of every .pte the experiment compiled, step by step (the same bytes both ways: a program compiled
    in a child of the rehearsed warm host is the one a fresh process compiles)."""
    return [(job.get("compile") or {}).get("pte_sha256") for job in _jobs(experiment)]


def _step_id(job: dict[str, Any]) -> str:
    return json.dumps([job.get("step_type"), job.get("config_hash"), job.get("input")], sort_keys=True)


def _cpu_s() -> float:
    """CPU seconds of this process and every process it waited for (the pool's, the host's and the trials' children
    included: each reaps its own), user + system."""
    mine, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + waited.ru_utime + waited.ru_stime


def _pools(way: str, caches: Path, measures_here: bool) -> Any:
    from np_optimizer.api.trial import WORKER
    from np_optimizer.sweep.pool import LocalPool

    if way == "new":
        os.environ.update(_cache_env(caches))
        return LocalPool(1, WORKER, warm=True, measures_here=measures_here)

    class OldPool(LocalPool):
        """A fresh process per trial, each with empty caches of its own (its environment is taken at the submit)."""

        def submit(self, job: Any) -> None:
            os.environ.update(_cache_env(caches / f"trial-{job.number}"))
            super().submit(job)

    return OldPool(1, WORKER, warm=False)


def _sweep(project: Path, way: str, caches: Path) -> dict[str, Any]:
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.sweep.plan import measures_here
    from np_optimizer.workspace import Project

    sweep_file = project / "sweep.yaml"
    sweep = load_sweep(sweep_file)
    cpu = _cpu_s()
    pool = _pools(way, caches, measures_here(Project(project), sweep))
    run = SweepRun(Project(project), sweep, sweep_file, 1, "bench")
    began: dict[int, float] = {}
    walls: dict[str, float] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["kind"] == "trial_start":
            began[event["number"]] = time.perf_counter()
        elif event["kind"] == "trial_done":
            walls[event["experiment"]] = time.perf_counter() - began[event["number"]]

    started = time.perf_counter()
    record = run_sweep(run, pool, on_event)  # it closes the pool: the host and the measuring process are waited for
    wall, cpu = time.perf_counter() - started, _cpu_s() - cpu
    failed = [t for t in record.trials if t.state != "complete"]
    if failed:
        raise SystemExit(f"{len(failed)} trial(s) failed in {project}: {failed[0].reason}")
    trials, unique, computed = [], {}, 0
    for name, wall_s in sorted(walls.items()):
        jobs = _jobs(project / name)
        for job in (j for j in jobs if j.get("status") != "reused"):
            unique.setdefault(_step_id(job), float(job.get("duration_s") or 0))
            computed += 1
        trials.append((name, wall_s, sum(float(j.get("duration_s") or 0) for j in jobs), _rounds(project / name)))
    return {"wall": wall, "cpu": cpu, "trials": trials, "unique": sum(unique.values()), "unique_n": len(unique),
            "computed": computed,
            "host_s": pool.host.ready_s if pool.host is not None else None,
            "figures": {json.dumps(t.params, sort_keys=True): {**{k: v for k, v in t.values.items() if k not in MEASURED},
                                                               "pte_sha256": _pte_sha256(project / t.experiment)}
                        for t in record.trials}}


def _print(sweep: str, way: str, got: dict[str, Any]) -> dict[str, float]:
    trials = got["trials"]
    overheads = [wall - steps - rounds for _name, wall, steps, rounds in trials]
    host = got["host_s"]
    print(f"\n{sweep}, {way} way: sweep wall {got['wall']:.1f} s ({got['cpu']:.1f} CPU s) for {len(trials)} trials; "
          f"{got['computed']} steps "
          f"computed, {got['unique_n']} distinct (their first computations: {got['unique']:.1f} s)"
          f"{f'; the warm host was ready {host:.1f} s after the pool started it' if host is not None else ''}")
    print(f"  {'trial':<15}{'wall s':>8}{'steps s':>9}{'profiling s':>13}{'overhead s':>12}")
    for (name, wall, steps, rounds), overhead in zip(trials, overheads, strict=True):
        print(f"  {name:<15}{wall:>8.2f}{steps:>9.2f}{rounds:>13.2f}{overhead:>12.2f}")
    mean = sum(overheads) / len(overheads)
    later = overheads[1:] or overheads
    print(f"  per-trial overhead: mean {mean:.2f} s, after the first trial {sum(later) / len(later):.2f} s "
          f"(issue 36's target: at most 1 s)")
    return {"mean": mean, "later": sum(later) / len(later)}


def _make_vit(ws: Path) -> None:
    """A project `vit` on raspberry_pi_5 from a Hugging Face ViT folder saved from VIT_CONFIG, and its sweep."""
    import torch
    import transformers

    from np_optimizer import api

    folder = ws.parent / "vit-model"
    torch.manual_seed(0)
    transformers.ViTForImageClassification(transformers.ViTConfig(**VIT_CONFIG)).eval().save_pretrained(folder)
    api.projects_create(name="vit", model=str(folder), device="raspberry_pi_5", cwd=ws)
    api.experiments_create(steps="go,gq", name="experiment_01", cwd=ws / "vit")
    (ws / "vit" / "experiment_01" / "run.yaml").write_text(VIT_RUN)
    (ws / "vit" / "sweep.yaml").write_text(VIT_SWEEP)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sweeps", default=",".join(SWEEPS), help=f"comma-separated, of {', '.join(SWEEPS)}")
    parser.add_argument("--only", choices=["old", "new"], help="run one way only")
    args = parser.parse_args()
    sweeps = [s for s in args.sweeps.split(",") if s]
    if not sweeps or set(sweeps) - set(SWEEPS):
        parser.error(f"--sweeps: names of {', '.join(SWEEPS)}")
    ways = [w for w in ("old", "new") if not args.only or w == args.only]
    base = Path(tempfile.mkdtemp(prefix="np-bench-sweep-cost-"))
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg")  # nothing of ~/.cache (torch's, transformers', np's)
    from np_optimizer import api

    # the page cache holds the libraries before either way starts, so neither pays the first read from disk
    subprocess.run([sys.executable, "-c", "import torch, executorch.exir"], capture_output=True, check=False)
    began = time.perf_counter()
    summary = []
    try:
        api.workspace_init(base / "ws")
        if "vit" in sweeps:
            _make_vit(base / "ws")
        for sweep in sweeps:
            got: dict[str, dict[str, Any]] = {}
            for way in ways:
                shutil.copytree(base / "ws", base / f"{sweep}-{way}")
                got[way] = _sweep(base / f"{sweep}-{way}" / sweep, way, base / f"{sweep}-{way}-caches")
            over = {way: _print(sweep, way, value) for way, value in got.items()}
            if len(got) == 2:
                old, new = got["old"], got["new"]
                same = old["figures"] == new["figures"]
                summary.append(f"{sweep:<11} old {old['wall']:6.1f} s  new {new['wall']:6.1f} s  "
                               f"{old['wall'] / new['wall']:4.2f}x faster (CPU s {old['cpu']:.0f} -> {new['cpu']:.0f}, "
                               f"{old['cpu'] / new['cpu']:.2f}x; at most {old['wall'] / new['unique']:.2f}x: "
                               f"the new way's unique steps took {new['unique']:.1f} s); overhead per trial "
                               f"{over['old']['mean']:.2f} -> {over['new']['mean']:.2f} s (after the first trial "
                               f"{over['new']['later']:.2f} s); same figures: {same}")
        if summary:
            print("\nold way against new (1 worker; wall = time.perf_counter around the sweep):")
            print("\n".join(f"  {line}" for line in summary))
        print(f"\nthe bench took {time.perf_counter() - began:.0f} s; load average now "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
