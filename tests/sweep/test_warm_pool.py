"""The local pool's warm host (sweep/host.py): every trial of a sweep is a fresh child forked by one host that
imported torch and ExecuTorch once; a trial killed with SIGKILL mid-run is a failed trial naming the signal, and the
next trial still runs warm; a host that cannot start leaves fresh processes per trial, said in one warning."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.api.trial import WORKER
from np_optimizer.records.sweep import TrialJob
from np_optimizer.sweep.pool import LocalPool
from np_optimizer.sweep.worker import Worker
from tests.helpers import make_project, proc_stat, wait_for

pytestmark = pytest.mark.own_steps  # trials killed mid-run need steps that run

SWEEP = """version: "1.0"
method: mlia
space:
  graph_quantize.scheme: [W8-A8, W8-A8_dynamic, W4-A8_dynamic]
objectives: [{pte_size: min}, {snr: max}]
"""


def _descendants(root: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[0] not in ("Z", "X"):
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), [root]
    while frontier:
        parent = frontier.pop()
        children = {pid for pid, ppid in parents.items() if ppid == parent} - found
        found |= children
        frontier.extend(children)
    return found


def _parent(pid: int) -> int:
    fields = proc_stat(pid)
    assert fields is not None, f"trial process {pid} is gone already"
    return int(fields[1])


@pytest.mark.np_run
def test_trials_are_children_of_one_warm_host_and_a_killed_one_fails_with_its_signal(tmp_path: Path) -> None:
    from np_optimizer.config.sweep import load_sweep
    from np_optimizer.sweep.driver import SweepRun, run_sweep
    from np_optimizer.workspace import Project, Workspace

    Workspace.create(tmp_path / "ws")
    project = make_project(tmp_path / "ws", "mlp", steps="gq").parent
    (project / "sweep.yaml").write_text(SWEEP)
    pool = LocalPool(1, WORKER, warm=True)
    parents: dict[int, int] = {}  # trial number -> its process's parent, seen while it runs

    def on_event(event: dict[str, Any]) -> None:
        number = event.get("number")
        if event["kind"] != "progress" or number in parents:
            return
        pid = pool.processes()[number]
        parents[number] = _parent(pid)
        assert pool.host is not None and _parent(pool.host.pid) == os.getpid()  # the pool's own host
        if number == 1:  # mid-run: its np run has started
            os.kill(pid, signal.SIGKILL)

    run = SweepRun(Project(project), load_sweep(project / "sweep.yaml"), project / "sweep.yaml", 1, "test")
    record = run_sweep(run, pool, on_event)

    host = pool.host
    assert host is not None
    assert parents == {0: host.pid, 1: host.pid, 2: host.pid}  # each trial a child of the one host
    assert host.forked == 3
    states = {t.number: (t.state, t.reason) for t in record.trials}
    assert states[0][0] == "complete" and states[2][0] == "complete", states  # the trial after the kill ran warm
    assert states[1][0] == "failed" and "killed by signal 9" in str(states[1][1]), states
    assert host.proc.poll() is not None  # the sweep's end stopped the host


def test_a_host_that_cannot_start_leaves_fresh_processes_and_one_warning(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A worker module that does not import: the host says so, the pool warns once and starts each trial as a fresh
    process (which fails the same way, as a failed trial)."""
    pool = LocalPool(1, Worker("np_optimizer.no_such_worker", WORKER.run), warm=True)
    results = []
    with caplog.at_level(logging.WARNING, logger="np"):
        try:
            for number in range(2):
                pool.submit(TrialJob(number, tmp_path / f"experiment_0{number + 2}"))
                while not (done := [e for e in pool.poll(1.0) if e.kind == "done"]):
                    pass
                results.extend(e.result for e in done)
        finally:
            pool.close()
    warnings = [r.getMessage() for r in caplog.records if "warm trial host" in r.getMessage()]
    assert len(warnings) == 1 and "no_such_worker" in warnings[0], warnings
    assert pool.host is None and not pool.warm
    assert [r.status for r in results if r is not None] == ["failed", "failed"]
    assert all(r is not None and r.error is not None and "exit code 1" in r.error.message for r in results)


@pytest.mark.np_run
def test_the_host_and_its_trials_die_with_a_killed_sweep(tmp_path: Path) -> None:
    """kill -9 of np sweep while a trial runs: the warm host and the trial's process it forked are gone at once (the
    death signals), so nothing holds the trial's experiment for np sweep --resume."""
    from np_optimizer.workspace import Workspace

    Workspace.create(tmp_path / "ws")
    project = make_project(tmp_path / "ws", "mlp", steps="gq").parent
    (project / "sweep.yaml").write_text(SWEEP)
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "sweep", "--json", "--workers", "1"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if json.loads(raw)["kind"] == "progress":  # the trial's np run has started, in a child of the host
                break
        below = _descendants(proc.pid)
        assert len(below) >= 2, below  # the host and the trial (and what the trial started)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not any(proc_stat(pid) and proc_stat(pid)[0] not in ("Z", "X")  # type: ignore[index]
                             for pid in below), 10, f"the killed sweep's processes {sorted(below)} to end")


def _next_event(pool: LocalPool, number: int, kind: str) -> Any:
    for _ in range(120):
        for event in pool.poll(1.0):
            if event.number == number and event.kind == kind:
                return event
    raise AssertionError(f"no {kind} event of trial {number} in 120 s")


def test_a_host_that_dies_fails_its_trial_and_a_new_host_runs_the_next(tmp_path: Path) -> None:
    """The host killed (as the out-of-memory killer would) while a trial runs: that trial is failed with the signal,
    and the next trial runs in a child of a new host, with no fall-back to fresh processes."""
    pool = LocalPool(1, Worker("tests.sweep.pool_worker", WORKER.run), warm=True)
    try:
        pool.submit(TrialJob(0, tmp_path / "experiment_02"))
        _next_event(pool, 0, "progress")
        first = pool.host
        assert first is not None and _parent(pool.processes()[0]) == first.pid
        os.kill(first.pid, signal.SIGKILL)
        killed = _next_event(pool, 0, "done").result
        assert killed.status == "failed" and "killed by signal 9" in killed.error.message
        (tmp_path / "experiment_03").mkdir()
        (tmp_path / "experiment_03" / "go").touch()
        pool.submit(TrialJob(1, tmp_path / "experiment_03"))
        second = pool.host
        assert second is not None and second is not first and second.pid != first.pid and pool.warm
        assert _next_event(pool, 1, "done").result.status == "success"
        assert second.forked == 1
    finally:
        pool.close()


def test_trials_that_measure_here_share_one_measuring_process_that_ends_with_the_pool(tmp_path: Path) -> None:
    """measures_here: the pool starts one warm measuring process (profiler/measure/warm.py) and hands its socket to
    every trial, so no trial imports torch and the runtime for its own; it is gone once the pool is closed."""
    pool = LocalPool(1, Worker("tests.sweep.pool_worker", WORKER.run), warm=True, measures_here=True)
    try:
        for number in range(2):
            (tmp_path / f"experiment_0{number + 2}").mkdir()
            (tmp_path / f"experiment_0{number + 2}" / "go").touch()
            pool.submit(TrialJob(number, tmp_path / f"experiment_0{number + 2}"))
            assert _next_event(pool, number, "done").result.status == "success"
        sockets = {(tmp_path / f"experiment_0{n}" / "measuring").read_text() for n in (2, 3)}
        assert len(sockets) == 1 and Path(next(iter(sockets))).is_socket(), sockets  # one, shared, serving
        assert pool.host is not None and pool.host.forked == 2
    finally:
        pool.close()
    assert not Path(next(iter(sockets))).exists()  # the measuring process ended with the pool


def test_a_host_whose_prime_fails_forks_nothing_more_and_the_next_trial_starts_fresh(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The host starts with the pool (its imports overlap the sweep's set-up); the worker's prime runs in it before
    its first fork (the first trial starts primed) and after each fork; one that raises (a trace left a thread
    running, so a fork could hang) makes the host refuse the next trial, which starts as a fresh process, said in one
    warning."""
    pool = LocalPool(1, Worker("tests.sweep.pool_worker", WORKER.run), warm=True)
    assert pool.host is not None and pool.host.alive()  # before any trial
    folders = [tmp_path / f"experiment_0{n}" for n in (2, 3, 4)]
    for folder in folders:
        folder.mkdir()
        (folder / "go").touch()
    (folders[1] / "refuse").touch()
    try:
        with caplog.at_level(logging.WARNING, logger="np"):
            for number in range(3):
                pool.submit(TrialJob(number, folders[number]))
                assert _next_event(pool, number, "done").result.status == "success"
                if number == 0:
                    host = pool.host
    finally:
        pool.close()
    assert host is not None and host.forked == 2  # the trial whose prime failed still ran forked; the next did not
    assert [int((f / "primed").read_text()) for f in folders[:2]] == [host.pid, host.pid]  # primed in the host
    assert (folders[0] / "primed_at_start").read_text() == "True"  # the first trial was forked after the prime
    assert not (folders[2] / "primed").exists() and pool.host is None and not pool.warm
    assert host.proc.poll() is not None
    warnings = [r.getMessage() for r in caplog.records if "warm trial host" in r.getMessage()]
    assert len(warnings) == 1 and "left 1 thread(s) running" in warnings[0], warnings


def test_the_host_rehearses_beside_the_first_trial_only_and_a_measurement_waits_for_it(tmp_path: Path) -> None:
    """After its first fork the host rehearses (compile/rehearsal.py for XNNPACK), holding the busy lock it took before
    that fork: the first trial's measurement waits until the rehearsal is over (its CPU is not the model's time), the
    next trial is forked from the rehearsed host and nothing rehearses again; the lock's folder goes with the pool."""
    pool = LocalPool(1, Worker("tests.sweep.pool_worker", WORKER.run), warm=True)
    folders = [tmp_path / f"experiment_0{n}" for n in (2, 3)]
    for folder in folders:
        folder.mkdir()
        (folder / "rehearse").touch()
    (folders[0] / "measure").touch()
    try:
        pool.submit(TrialJob(0, folders[0]))
        assert _next_event(pool, 0, "progress").text == "started"
        wait_for(lambda: (folders[0] / "rehearsing").exists(), 60, "the host's rehearsal")
        host = pool.host
        assert host is not None and int((folders[0] / "rehearsing").read_text()) == host.pid
        busy_dir = host._busy_dir
        time.sleep(0.5)
        assert not (folders[0] / "measured").exists()  # the trial waits while the host rehearses
        (folders[0] / "rehearsal_go").touch()
        wait_for(lambda: (folders[0] / "measured").exists(), 60, "the trial's measurement")
        assert (folders[0] / "measured").read_text() == "True"  # it went on once the rehearsal was over
        (folders[0] / "go").touch()
        assert _next_event(pool, 0, "done").result.status == "success"
        (folders[1] / "go").touch()
        pool.submit(TrialJob(1, folders[1]))
        assert _next_event(pool, 1, "done").result.status == "success"
        assert not (folders[1] / "rehearsing").exists() and host.forked == 2  # once per host
    finally:
        pool.close()
    assert not busy_dir.exists()
