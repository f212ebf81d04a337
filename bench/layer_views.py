"""Benchmark: the per-layer views on a sample (target: each at most 0.5 s, as a fresh process).

Runs sample_npu once (np run: every checkpoint estimated on alif_e8 with its per-layer file, and the per-layer SNR
of each step), then times each view as fresh processes, the way a user runs them: `np report --layers` (table,
--json, --plain), `np compare` (table, --json) and, as the baseline, `np report` and `np --version` (start-up alone).

    .venv/bin/python bench/layer_views.py [rounds] [EXPERIMENT]   (EXPERIMENT: a finished one, e.g. make demo's
                                                                   demo-workspace/sample_npu/experiment_01)
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import np_command, spread, timed, workspace  # noqa: E402

VIEWS = (("report", "--layers"), ("report", "--layers", "--json"), ("report", "--layers", "--plain"),
         ("compare",), ("compare", "--json"))
BASELINES = (("report",), ("--version",))
TARGET_S = 0.5


def main() -> int:
    from np_optimizer import api

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    exp = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else workspace() / "sample_npu" / "experiment_01"
    if len(sys.argv) <= 2:
        api.run(experiment=str(exp))
    print(f"Per-layer views on {exp.parent.name}, {rounds} fresh processes each (wall time: median [min..max]):")
    over = 0
    for args in (*VIEWS, *BASELINES):
        command = np_command(*args)
        timed(command, exp)  # warm-up: page cache, .pyc files
        samples = [timed(command, exp) for _ in range(rounds)]
        view = args in VIEWS
        verdict = ("ok" if statistics.median(samples) <= TARGET_S else "OVER TARGET") if view else "baseline"
        over += verdict == "OVER TARGET"
        print(f"  np {' '.join(args):<24} {spread(samples)}   [{verdict}{f': <= {TARGET_S} s' if view else ''}]")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
