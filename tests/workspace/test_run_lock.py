"""The run lock (issue 11), with real processes and real files: a second `np run`, or an `np profile`, beside a running
`np run` is refused naming it (pid, start time); a lock left by a dead process, or a record naming a reused pid, is
no obstacle and is never named. The other half of issue 11, nothing left running, is in
tests/profiler/measure/test_locks_and_orphans.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import make_project, proc_stat, run_np_subprocess, wait_for

pytestmark = pytest.mark.own_steps  # a run must still be running when the others are tried

# Holds an experiment's run lock as np profile does (shared) until killed.
HOLD_RUN_LOCK = r"""
import sys, time
from pathlib import Path
from np_optimizer.workspace import Experiment
from np_optimizer.workspace.run_lock import run_lock
with run_lock(Experiment(Path(sys.argv[1])), "np profile", exclusive=False):
    Path(sys.argv[2]).write_text("held")
    time.sleep(600)
"""

GO_ONLY = 'version: "1.0"\nsteps:\n- graph_optimize: null\n'


def _started(message: str) -> float:
    found = re.search(r"started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\)", message)
    assert found, message
    return time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S"))


@pytest.mark.np_run
def test_second_np_run_and_np_profile_are_refused_beside_a_running_np_run(tmp_path: Path) -> None:
    from np_optimizer import api

    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "locked", device="host", run_yaml=GO_ONLY)
    log = exp / "logs" / "execution.log"
    launched = time.time()
    first = subprocess.Popen([sys.executable, "-m", "np_optimizer", "run"], cwd=exp, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: log.is_file() and log.stat().st_size > 0, 60, "the first np run to start")
        second = run_np_subprocess("run", "--json", cwd=exp, timeout=120)
        profile = run_np_subprocess("profile", "INPUT_MODEL", "--json", cwd=exp, timeout=120)
        status = run_np_subprocess("status", cwd=exp, timeout=120)  # lock-free
        assert first.poll() is None, "the first np run ended before the others were tried"
    finally:
        first.kill()
        first.wait()
    for refused, command in ((second, "np run"), (profile, "np profile")):
        assert refused.exit_code == 3, refused.stdout + refused.stderr
        error = refused.json
        assert error["code"] == "NP-EXP-423", error
        assert f"np run (pid {first.pid}, started " in error["message"] and command in error["message"]
        assert abs(_started(error["message"]) - launched) < 5  # its start time, so a reused pid is told apart
        assert f"kill {first.pid}" in error["hint"]
    assert status.exit_code == 0, status.stderr
    # the first np run died with kill -9: its lock is no obstacle (this np profile gets past it, to its own error)
    after = run_np_subprocess("profile", "NO_SUCH_CHECKPOINT", "--json", cwd=exp, timeout=120)
    assert after.json["code"] == "NP-CPF-404", after.stdout
    assert not list((exp / ".run-holders").glob("*.json"))  # the dead holder's record was cleared


def test_run_lock_names_its_live_holder_never_a_reused_pid(tmp_path: Path) -> None:
    from np_optimizer import api
    from np_optimizer.workspace.run_lock import HOLDERS_DIR

    api.workspace_init(tmp_path / "ws")
    exp = make_project(tmp_path / "ws", "named", device="host", run_yaml=GO_ONLY)
    records = exp / HOLDERS_DIR
    records.mkdir()
    # this test's own pid, alive, but with another start time: a pid reused since np recorded it
    start = int(proc_stat(os.getpid())[19])  # type: ignore[index]
    reused = records / f"{os.getpid()}.json"
    reused.write_text(json.dumps({"pid": os.getpid(), "pid_start": start + 4242, "command": "np run",
                                  "exclusive": True, "locked_at": time.time()}))
    damaged = records / "1.json"
    damaged.write_bytes(b"\x8f\xfe{not json")
    marker = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_RUN_LOCK, str(exp), str(marker)])
    try:
        wait_for(marker.is_file, 60, "the holder to take the lock")
        refused = run_np_subprocess("run", "--json", cwd=exp, timeout=120)
        assert refused.exit_code == 3 and refused.json["code"] == "NP-EXP-423", refused.stdout
        message = refused.json["message"]
        assert f"np profile (pid {holder.pid}, started " in message and f"pid {os.getpid()}" not in message
        assert not reused.exists() and not damaged.exists()  # stale and damaged records are deleted on sight
        shared = run_np_subprocess("profile", "NO_SUCH_CHECKPOINT", "--json", cwd=exp, timeout=120)
        assert shared.json["code"] == "NP-CPF-404", shared.stdout  # np profiles share the lock
    finally:
        holder.kill()
        holder.wait()
    after = run_np_subprocess("run", "--dry-run", cwd=exp, timeout=120)
    assert after.exit_code == 0, after.stderr  # (a dry run never takes the lock)
    assert [p.name for p in records.glob("*.json")] == [f"{holder.pid}.json"]  # killed: its record stayed
    again = run_np_subprocess("profile", "NO_SUCH_CHECKPOINT", "--json", cwd=exp, timeout=120)
    assert again.json["code"] == "NP-CPF-404", again.stdout  # a dead holder is no obstacle, and is cleared
    assert not list(records.glob("*.json"))


def test_wait_until_free_waits_for_a_holder_that_is_dying_and_gives_up_on_one_that_stays(tmp_path: Path) -> None:
    """A resumed np sweep waits this way for the stopped sweep's trials to let go of their experiments."""
    from np_optimizer.workspace.run_lock import wait_until_free

    exp = tmp_path / "experiment_01"
    exp.mkdir()
    assert wait_until_free(exp, 0)  # never locked: no lock file
    marker = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_RUN_LOCK, str(exp), str(marker)])
    try:
        wait_for(marker.is_file, 60, "the holder to take the lock")
        started = time.monotonic()
        assert not wait_until_free(exp, 0.5)
        assert time.monotonic() - started >= 0.5
        threading.Timer(1.0, holder.kill).start()
        assert wait_until_free(exp, 60)
        assert holder.wait(timeout=30) is not None
    finally:
        holder.kill()
        holder.wait()
