"""Benchmark: np's start-up against typer and rich alone, paired on this machine (issue 35, item 7).

The floor is `python -c "import typer, rich.console, rich.table"`: what any typer + rich command line pays before
its own code. Timed as fresh processes, the way a user runs them, with the `np` console script next to this Python:

    np --version             target: at most 1.3x the floor
    np report, np status     on a finished sample_cpu (np run, then measured on `host` as in make demo); at most 1.8x

The four commands run interleaved (one of each per round, the order rotating), after warm-up rounds, so a busy
machine slows them alike; each prints its median wall time with the interquartile range, and its ratio to the floor:
the median of the per-round ratios (paired), with their IQR. CPU time (user + system) of the same runs is printed
beside it, since it depends less on the load. The timed processes keep compiled bytecode under the folder's pycache/
(PYTHONPYCACHEPREFIX), as an installed np keeps its .pyc files: without them every start compiles np's modules.

    .venv/bin/python bench/cli_startup.py [--rounds 30] [--warmup 3] [--folder DIR]

DIR keeps the workspace (DIR/ws, its sample_cpu run takes one to two minutes) and is reused when given again. To time
another checkout's code, put its src first: `PYTHONPATH=/work/main/src .venv/bin/python bench/cli_startup.py ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

FLOOR = "import typer, rich.console, rich.table"
TARGETS = {"--version": 1.3, "report": 1.8, "status": 1.8}


def np_script() -> list[str]:
    """The console script `np` of this Python's environment (what users run), else `python -m np_optimizer`."""
    script = Path(sys.executable).parent / "np"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "np_optimizer"]


def timed_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    env["NP_CACHE_DIR"] = str(folder / "cache")
    return env


def run_checked(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc.stdout


def sample_cpu(folder: Path, env: dict[str, str]) -> Path:
    """sample_cpu/experiment_01 of DIR/ws, run and measured on host unless an earlier call left it finished."""
    np = np_script()
    root = folder / "ws"
    exp = root / "sample_cpu" / "experiment_01"
    if not root.exists():
        run_checked([*np, "workspace", "init", str(root)], folder, env)
    if json.loads(run_checked([*np, "status", "--json"], exp, env)).get("status") == "success":
        print(f"Reusing the finished run in {exp}")
        return exp
    print(f"Running sample_cpu in {exp} (np run, then np profile --method on-device -d host) ...", flush=True)
    start = time.perf_counter()
    run_checked([*np, "run", "--retry"], exp, env)
    run_checked([*np, "profile", "--method", "on-device", "-d", "host"], exp, env)
    print(f"  done in {time.perf_counter() - start:.0f} s")
    return exp


def one_run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh process; a failure stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def versions() -> str:
    import np_optimizer

    tools = ", ".join(f"{d} {metadata.version(d)}" for d in ("typer", "click", "rich"))
    return (f"np {np_optimizer.__version__} ({Path(np_optimizer.__file__).parent}), Python {platform.python_version()}, "
            f"{tools}; {platform.machine()}, {os.cpu_count()} cores")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--folder", type=Path, help="keeps the workspace; reused when given again")
    args = parser.parse_args()
    folder = (args.folder or Path(tempfile.mkdtemp(prefix="np-bench-startup-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    env = timed_env(folder)
    print(versions())
    exp = sample_cpu(folder, env)
    np = np_script()
    commands = {"floor": [sys.executable, "-c", FLOOR], "--version": [*np, "--version"],
                "report": [*np, "report"], "status": [*np, "status"]}
    names = list(commands)
    load_before = os.getloadavg()
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for index in range(args.warmup + args.rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:  # rotated: no command always runs first or after another
            w, c = one_run(commands[name], exp, env)
            if index >= args.warmup:
                wall[name].append(w)
                cpu[name].append(c)
    load_after = os.getloadavg()
    print(f"\n{args.rounds} rounds after {args.warmup} warm-up, interleaved, in {exp.parent.name}/{exp.name} "
          f"(`{' '.join(Path(p).name for p in np)}`); wall time median [IQR], ratio to the floor = median of the "
          "per-round ratios [IQR]; CPU = user + system")
    print(f"  {'floor: ' + FLOOR:<50} {_median(wall['floor'])}   CPU {statistics.median(cpu['floor']) * 1e3:.0f} ms")
    over = 0
    for name in names[1:]:
        ratios = [n / f for n, f in zip(wall[name], wall["floor"])]
        cpu_ratio = statistics.median(cpu[name]) / statistics.median(cpu["floor"])
        q1, ratio, q3 = quartiles(ratios)
        verdict = "ok" if ratio <= TARGETS[name] else "OVER TARGET"
        over += verdict != "ok"
        print(f"  {'np ' + name:<50} {_median(wall[name])}   ratio {ratio:.2f} [{q1:.2f}..{q3:.2f}]   "
              f"CPU {statistics.median(cpu[name]) * 1e3:.0f} ms ({cpu_ratio:.2f}x)   [{verdict}: <= {TARGETS[name]}x]")
    print(f"{'every figure within its target' if not over else f'{over} over target'}; load average (1, 5, 15 min): "
          f"before {_load(load_before)}, after {_load(load_after)}, on {os.cpu_count()} cores")
    return 0


def _median(values: list[float]) -> str:
    q1, median, q3 = quartiles(values)
    return f"{median * 1e3:4.0f} ms [{q1 * 1e3:.0f}..{q3 * 1e3:.0f}]"


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.1f}" for x in load)


if __name__ == "__main__":
    sys.exit(main())
