"""The device queue, with real concurrent processes: two on-device profiles of `host` never measure at the same time,
and the one that waits says its place and the estimated wait. The lock's own behaviour (FIFO, stale entries, a killed
holder, the overrun warning) is checked with light processes that only hold the lock."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.profiler.measure.device_queue import (
    DEFAULT_OVERHEAD_S,
    DeviceLock,
    QueueStatus,
    device_key,
    expected_duration,
    record_duration,
)
from tests.helpers import MlpModels

# One `np profile`-like process: the on-device method on host, its queue notices collected.
PROFILE_JOB = r"""
import json, logging, sys
from dataclasses import asdict
from pathlib import Path
from np_optimizer.compile.result import read_compile_record
from np_optimizer.devices import get_device
from np_optimizer.profiler.methods import get_method
from np_optimizer.profiler.request import ProfileRequest
compiled_dir, program, work, options, out = sys.argv[1:6]
notices = []
request = ProfileRequest(checkpoint="INPUT_MODEL", job="00_input_model", program_path=Path(program),
    program_sha256="0" * 64, compiled=read_compile_record(Path(compiled_dir)), compiled_dir=Path(compiled_dir),
    device=get_device("host"), options=json.loads(options), work_dir=Path(work),
    log=logging.getLogger("np.Profiler"), queue_notice=notices.append)
output = get_method("on-device").profile(request)
Path(out).write_text(json.dumps({"output": asdict(output), "notices": notices}))
"""

# A process that only holds the lock for `hold` seconds.
LOCK_JOB = r"""
import json, sys, time
from dataclasses import asdict
from pathlib import Path
from np_optimizer.profiler.measure.device_queue import DeviceLock
device, expected, hold, out, state, name, slack = sys.argv[1:8]
events = []
def on_status(status):
    events.append(dict(asdict(status), t=time.time()))
    Path(out + ".events").write_text(json.dumps(events))
with DeviceLock(device, float(expected), label=name, on_status=on_status, directory=Path(state), poll_s=0.05,
                warn_slack_s=float(slack)):
    start = time.time()
    Path(out + ".started").write_text("1")
    time.sleep(float(hold))
    end = time.time()
Path(out).write_text(json.dumps({"start": start, "end": end, "events": events}))
"""


def wait_for(predicate: Any, timeout: float = 60.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def finished(proc: subprocess.Popen[bytes], out: Path, timeout: float = 120) -> dict[str, Any]:
    assert proc.wait(timeout=timeout) == 0
    return dict(json.loads(out.read_text()))


@pytest.mark.heavy
def test_two_concurrent_profiles_on_host_never_overlap(models: MlpModels, tmp_path: Path) -> None:
    env = {**os.environ, "NP_CACHE_DIR": str(tmp_path / "cache"), "NP_QUEUE_DIR": str(tmp_path / "queue")}

    def start(name: str, options: dict[str, Any]) -> tuple[subprocess.Popen[bytes], Path]:
        out = tmp_path / f"{name}.json"
        proc = subprocess.Popen([sys.executable, "-c", PROFILE_JOB, str(models.compiled_dir), str(models.program),
                                 str(tmp_path / name), json.dumps(options), str(out)], env=env)
        return proc, out

    holder = tmp_path / "queue" / "host.holder.json"
    # A measures for ~3 s (timeout) after its imports; B asks while A holds the device
    a, out_a = start("A", {"num_executions": 10**7, "warmup": 1, "timeout": 3})
    wait_for(lambda: holder.is_file() and json.loads(holder.read_text() or "{}").get("pid") == a.pid,
             what="A to hold the device")
    b, out_b = start("B", {"num_executions": 20, "warmup": 2, "timeout": 60})
    ra, rb = finished(a, out_a), finished(b, out_b)
    oa, ob = ra["output"], rb["output"]
    assert oa["partial"] and not ob["partial"]  # both succeeded: a failure would have raised in the job
    window_a, window_b = oa["extras"]["measured_window"], ob["extras"]["measured_window"]
    assert window_a["start"] < window_a["end"] <= window_b["start"] < window_b["end"], (window_a, window_b)
    assert oa["extras"]["device_lock_window"]["end"] <= ob["extras"]["device_lock_window"]["start"]
    assert ob["timings"]["queue_wait_s"] > 0.5 and oa["timings"]["queue_wait_s"] < 0.5
    assert ra["notices"] == []
    waiting = [n for n in rb["notices"] if "is busy" in n]
    assert len(waiting) == 1 and "number 1 in the queue" in waiting[0], rb["notices"]
    assert f"(np pid {a.pid})" in waiting[0]  # who holds the device
    estimate = float(re.search(r"estimated wait (\d+) s", waiting[0]).group(1))  # type: ignore[union-attr]
    # A's expected time: the default startup overhead + its 3 s timeout (no history in a fresh cache)
    assert 3 <= estimate <= DEFAULT_OVERHEAD_S + 3
    assert any(n.startswith("Device host is free after") for n in rb["notices"])


def spawn(tmp: Path, name: str, expected: float, hold: float, slack: float = 1.0,
          device: str = "dev-a") -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp / f"{name}.json"
    proc = subprocess.Popen([sys.executable, "-c", LOCK_JOB, device, str(expected), str(hold), str(out),
                             str(tmp / "state"), name, str(slack)])
    return proc, out


def events_of(out: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(Path(f"{out}.events").read_text()))
    except (OSError, ValueError):
        return []


def test_fifo_places_and_estimates(tmp_path: Path) -> None:
    # A holds long enough for B and C to queue behind it even when Python starts slowly on a busy machine
    a, out_a = spawn(tmp_path, "A", expected=3.0, hold=3.0)
    wait_for(lambda: Path(f"{out_a}.started").exists(), what="A to start")
    b, out_b = spawn(tmp_path, "B", expected=1.0, hold=0.3)
    wait_for(lambda: any(e["event"] == "waiting" for e in events_of(out_b)), what="B to queue")
    c, out_c = spawn(tmp_path, "C", expected=0.2, hold=0.2)
    ra, rb, rc = finished(a, out_a), finished(b, out_b), finished(c, out_c)
    assert ra["end"] <= rb["start"] and rb["end"] <= rc["start"]
    waiting_b = [e for e in rb["events"] if e["event"] == "waiting"]
    assert waiting_b[0]["place"] == 1 and waiting_b[0]["holder"]["label"] == "A"
    assert 0.3 < waiting_b[0]["estimated_wait_s"] <= 3.0  # what is left of A's 3 s
    waiting_c = [e for e in rc["events"] if e["event"] == "waiting"]
    assert [e["place"] for e in waiting_c] == [2, 1] and [x["label"] for x in waiting_c[0]["ahead"]] == ["B"]
    assert waiting_c[0]["estimated_wait_s"] > 1.0  # A's remaining time + B's 1.0 s
    assert [e["event"] for e in ra["events"]] == ["acquired"] and ra["events"][0]["immediate"]


def test_stale_queue_entry_and_dead_holder_do_not_block(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    queue = tmp_path / "state" / f"{device_key('dev-a')}.queue"
    queue.mkdir(parents=True)
    stale = queue / f"1-{dead.pid}.json"  # enqueued_ns=1: first in line forever, if trusted
    stale.write_text(json.dumps({"pid": dead.pid, "pid_start": None, "host": socket.gethostname(), "enqueued_ns": 1,
                                 "enqueued_at": 0, "expected_s": 100, "label": "ghost"}))
    (tmp_path / "state" / f"{device_key('dev-a')}.holder.json").write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "label": "ghost", "expected_end": time.time() + 100}))
    t0 = time.time()
    p, out = spawn(tmp_path, "A", expected=0.1, hold=0.1)
    result = finished(p, out)
    assert result["start"] - t0 < 10 and [e["event"] for e in result["events"]] == ["acquired"]
    assert not stale.exists()


def test_killed_holder_releases_the_device(tmp_path: Path) -> None:
    a, out_a = spawn(tmp_path, "A", expected=30, hold=30)
    wait_for(lambda: Path(f"{out_a}.started").exists(), what="A to start")
    b, out_b = spawn(tmp_path, "B", expected=0.1, hold=0.1)
    wait_for(lambda: any(e["event"] == "waiting" for e in events_of(out_b)), what="B to queue")
    a.send_signal(signal.SIGKILL)
    a.wait()
    t0 = time.time()
    assert finished(b, out_b)["start"] - t0 < 3


def test_warns_when_the_wait_exceeds_the_estimate(tmp_path: Path) -> None:
    a, out_a = spawn(tmp_path, "A", expected=0.3, hold=2.0)  # A underestimates its time
    wait_for(lambda: Path(f"{out_a}.started").exists(), what="A to start")
    b, out_b = spawn(tmp_path, "B", expected=0.1, hold=0.1, slack=0.2)
    finished(a, out_a)
    late = [e for e in finished(b, out_b)["events"] if e["event"] == "wait_exceeds_estimate"]
    assert late and late[0]["waited_s"] > late[0]["estimated_wait_s"] and late[0]["holder_overdue"] is True


def test_in_process_lock_and_duration_history(tmp_path: Path) -> None:
    seen: list[QueueStatus] = []
    with DeviceLock("x", 1.0, on_status=seen.append, directory=tmp_path) as lock:
        holder = lock.holder()
        assert holder is not None and holder["pid"] == os.getpid()
        lock.update_expected(5.0)
        assert lock.holder()["expected_end"] > time.time() + 4  # type: ignore[index]
    assert [s.event for s in seen] == ["acquired"] and seen[0].immediate
    assert not lock.holder_path.exists() and lock.acquired_at is not None and lock.released_at is not None
    assert asdict(seen[0])["device"] == "x"

    seconds, how = expected_duration("x", "sha", runs=30, warmup=3, timeout_s=60, directory=tmp_path)
    assert seconds == pytest.approx(DEFAULT_OVERHEAD_S + 5.0) and how.startswith("rough")
    record_duration("x", "sha", overhead_s=2.0, latency_ms=100.0, directory=tmp_path)
    seconds, how = expected_duration("x", "sha", runs=30, warmup=3, timeout_s=60, directory=tmp_path)
    assert seconds == pytest.approx(2.0 + 33 * 0.1) and "earlier" in how
    assert expected_duration("x", "sha", runs=10**6, warmup=0, timeout_s=7, directory=tmp_path)[0] == \
        pytest.approx(2.0 + 7)  # the timeout caps the measuring part


def test_queue_messages_as_the_user_sees_them(models: MlpModels, tmp_path: Path) -> None:
    from np_optimizer.profiler.methods.on_device import _QueueReporter
    from tests.helpers import request_for

    notices: list[str] = []
    reporter = _QueueReporter(request_for(models, tmp_path, {}, notices=notices), "host")
    holder = {"pid": 4242, "label": "input_model of 00_input_model (np pid 4242)"}
    reporter(QueueStatus("acquired", "host", immediate=True))  # no wait: nothing to say
    reporter(QueueStatus("waiting", "host", place=2, estimated_wait_s=12.4, holder=holder))
    reporter(QueueStatus("wait_exceeds_estimate", "host", place=1, estimated_wait_s=12.4, waited_s=20.2,
                         holder=holder, holder_overdue=True, new_estimate_s=3.0))
    reporter(QueueStatus("acquired", "host", waited_s=24.0))
    assert notices[0] == ("Device host is busy with input_model of 00_input_model (np pid 4242): this measurement is "
                          "number 2 in the queue, estimated wait 12 s. The timeout starts when it runs.")
    assert notices[1].startswith("Warning: The wait for device host (20 s) has grown beyond the estimate of 12 s")
    assert notices[2] == "Device host is free after 24.0 s in the queue; measuring now."
    assert len(notices) == 3 and reporter.warnings == [notices[1].removeprefix("Warning: ")]
