"""Benchmark: `np report --html` on the samples (target: at most 1 s, file under 300 KB).

Runs sample_npu and sample_cpu once (sample_cpu also measured on this machine, so its page has measured rounds and
their spread), then times `np report --html` as fresh processes (what a user or a CI job runs) and the rendering
alone in this process.

    .venv/bin/python bench/report_html.py [rounds] [WORKSPACE]   (WORKSPACE: reuse finished samples, e.g. make demo's)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import np_command, spread, timed, workspace  # noqa: E402


def main() -> int:
    from np_optimizer import api
    from np_optimizer.report.html import render_html
    from np_optimizer.report.pages import experiment_pages

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    reuse = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else None
    root = reuse or workspace()
    experiments = {name: root / name / "experiment_01" for name in ("sample_npu", "sample_cpu")}
    for name, exp in experiments.items():
        if reuse is not None:
            continue  # finished samples given
        api.run(experiment=str(exp))
        if name == "sample_cpu":
            api.profile(experiment=str(exp), method="on-device", device="host")
    print(f"np report --html, {rounds} rounds each (wall time: median [min..max]):")
    for name, exp in experiments.items():
        command, table = np_command("report", "--html"), np_command("report")
        timed(command, exp)  # warm-up: page cache, .pyc files, compiled templates
        process, baseline = [], []
        for _ in range(rounds):  # alternated with the table report: the same load for both
            process.append(timed(command, exp))
            baseline.append(timed(table, exp))
        record = api.report(experiment=str(exp))
        renders = []
        for _ in range(rounds):
            start = time.perf_counter()
            html = render_html(record, experiment_pages(record))
            renders.append(time.perf_counter() - start)
        size = (exp / "report.html").stat().st_size
        verdict = "ok" if statistics.median(process) <= 1.0 and size < 300_000 else "OVER TARGET"
        print(f"  {name:<11} np report --html {spread(process)} (np report, the table: {spread(baseline)})   "
              f"render only {statistics.median(renders) * 1000:.0f} ms   {size / 1024:.0f} KB "
              f"({len(html.encode()) / 1024:.0f} KB rendered)   [{verdict}: <= 1 s, < 300 KB]")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
