"""Benchmark: the front Optuna finds with a budget of 12 trials against the full grid of the same space.

The MLP on raspberry_pi_5 (MLIA's static figures: .pte size and SNR are deterministic, so the grid's front is
exact): GO on/off x GQ scheme (3) x calibration samples (8, 16, 32, 64) = 24 configurations. Runs the full grid,
then `{optuna: {trials: 12, seed: 0}}` (TPE on both objectives), and prints how many of the grid's Pareto-optimal
configurations the 12 trials found, and the wall time of each sweep.

    python bench/sweep_optuna.py [--trials 12] [--seed 0]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SPACE = """version: "1.0"
method: mlia
space:
  graph_optimize: [true, false]
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic, W4-A8_dynamic]
  graph_quantize.calibration.num_samples: [8, 16, 32, 64]
objectives: [{pte_size: min}, {snr: max}]
"""


def _sweep(project: Path, strategy: str) -> tuple[float, set[str], int]:
    (project / "sweep.yaml").write_text(SPACE + f"strategy: {strategy}\n")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", "sweep", "--quiet"], cwd=project,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"np sweep ({strategy}) failed:\n{proc.stderr}")
    from np_optimizer.report.front import front_view
    from np_optimizer.workspace.sweep_files import read_sweep_record

    record = read_sweep_record(project)
    assert record is not None
    view = front_view(record)
    # a point of the front is its objective values: configurations that tie (a dynamic scheme ignores the
    # calibration size) are one point
    front = {json.dumps(p.values, sort_keys=True) for p in view.trials if p.pareto}
    return elapsed, front, len(record.trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from np_optimizer.workspace import Workspace

    base = Path(tempfile.mkdtemp(prefix="np-bench-optuna-"))
    try:
        Workspace.create(base / "ws")
        from np_optimizer import api

        api.projects_create(name="mlp", model="mlp", device="raspberry_pi_5", cwd=base / "ws")
        api.experiments_create(steps="go,gq", project="mlp", cwd=base / "ws")
        project = base / "ws" / "mlp"
        searched = base / "ws" / "mlp_optuna"
        shutil.copytree(project, searched)
        data = json.loads((searched / "project.json").read_text())
        (searched / "project.json").write_text(json.dumps({**data, "name": "mlp_optuna"}))
        grid_s, grid_front, grid_n = _sweep(project, "grid")
        print(f"grid: {grid_n} trials in {grid_s:.1f} s, {len(grid_front)} distinct points on the front", flush=True)
        opt_s, opt_front, opt_n = _sweep(searched, f"{{optuna: {{trials: {args.trials}, seed: {args.seed}}}}}")
        found = grid_front & opt_front  # a grid front point optuna reached is on its front too
        print(f"optuna: {opt_n} trials in {opt_s:.1f} s, {len(opt_front)} on its own front")
        print(f"the grid's front found by optuna: {len(found)} of {len(grid_front)} "
              f"({100 * len(found) / max(1, len(grid_front)):.0f}%) with {opt_n / grid_n:.0%} of the grid's trials")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
