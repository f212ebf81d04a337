"""Nothing left running, nothing measuring twice (issue 11): with real processes and real files. (The run lock, the
other half of issue 11, is tested in tests/workspace/test_run_lock.py.)

- A killed np takes its measurement down, on this host and over SSH (a dropped connection too), and the device is
  given to the next measurement only once the measuring processes are gone.
- One device queue per user whatever $NP_CACHE_DIR says; damaged queue files are warned misses.

The measuring "np" killed here is a process running the on-device method exactly as `np profile` does (the MLP
compiled once per session for the other measurement tests), so no test pays for a whole `np run`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.profiler.measure.device_queue import DeviceLock, device_key, expected_duration, record_duration
from np_optimizer.profiler.measure.measure_pte.zygote import ZYGOTE_FLAG
from tests.helpers import MlpModels, proc_stat, wait_for
from tests.sshd_fixture import INSTALL_COMMAND, SshServer, sshd_available

# The on-device method as np profile runs it, on host or (with a remote) over SSH; it writes "ok" or its error.
MEASURE_JOB = r"""
import json, logging, sys
from pathlib import Path
from np_optimizer.compile.result import read_compile_record
from np_optimizer.devices import get_device
from np_optimizer.workspace.remote import RemoteDevice
from np_optimizer.errors import NpError, error_record
from np_optimizer.profiler.methods import get_method
from np_optimizer.profiler.request import ProfileRequest
compiled_dir, program, work, options, remote, out = sys.argv[1:7]
remote = RemoteDevice(**json.loads(remote)) if remote else None
request = ProfileRequest(checkpoint="INPUT_MODEL", job="00_input_model", program_path=Path(program),
    program_sha256="0" * 64, compiled=read_compile_record(Path(compiled_dir)), compiled_dir=Path(compiled_dir),
    device=get_device("raspberry_pi_5" if remote else "host"), options=json.loads(options), work_dir=Path(work),
    log=logging.getLogger("np.Profiler"), remote=remote)
try:
    get_method("on-device").profile(request)
    Path(out).write_text(json.dumps({"ok": True}))
except NpError as exc:
    Path(out).write_text(json.dumps(error_record(exc)))
"""

# Holds a device of the queue for `hold` s, with no folder given: where the queue lives is the code's choice.
HOLD_DEVICE = r"""
import json, sys, time
from pathlib import Path
from np_optimizer.profiler.measure.device_queue import DeviceLock
device, hold, out = sys.argv[1:4]
with DeviceLock(device, float(hold), poll_s=0.05) as lock:
    start = time.time()
    time.sleep(float(hold))
    end = time.time()
Path(out).write_text(json.dumps({"start": start, "end": end, "dir": str(lock.dir)}))
"""

LONG_MEASUREMENT = {"num_executions": 1_000_000, "warmup": 1, "timeout": 25}


@pytest.fixture(autouse=True)
def _private_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    queue = tmp_path / "queue"
    monkeypatch.setenv("NP_QUEUE_DIR", str(queue))
    monkeypatch.setenv("NP_CACHE_DIR", str(tmp_path / "cache"))
    return queue


# -- processes, from /proc ---------------------------------------------------------------------------------------

def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start ticks, command line) of every live process."""
    out: dict[int, tuple[int, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = proc_stat(int(entry.name))
            if fields and fields[0] not in ("Z", "X"):
                out[int(entry.name)] = (int(fields[1]), int(fields[19]), _cmdline(int(entry.name)))
    return out


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (start ticks, command line) of the live processes below `root`."""
    table = _processes()
    found: dict[int, tuple[int, str]] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start, cmd) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (start, cmd)
                frontier.append(pid)
    return found


def mentioning(text: str) -> dict[int, tuple[int, str]]:
    """The live processes whose command line contains `text` (the device's side of an SSH measurement)."""
    return {pid: (start, cmd) for pid, (_ppid, start, cmd) in _processes().items() if text in cmd}


def alive(pid: int, start: int) -> bool:
    fields = proc_stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X") and int(fields[19]) == start  # type: ignore[index]


def still_running(procs: dict[int, tuple[int, str]]) -> list[str]:
    return [cmd for pid, (start, cmd) in procs.items() if alive(pid, start)]


def start_measurement(models: MlpModels, tmp_path: Path, name: str, *, remote: dict[str, Any] | None = None,
                      env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / f"{name}.json"
    proc = subprocess.Popen([sys.executable, "-c", MEASURE_JOB, str(models.compiled_dir), str(models.program),
                             str(tmp_path / name), json.dumps(LONG_MEASUREMENT), json.dumps(remote) if remote else "",
                             str(out)], env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return proc, out


def worker_of(procs: dict[int, tuple[int, str]]) -> bool:
    """A measuring worker runs: a fresh one (--_worker), or one forked from np's warm process (then two processes
    carry the warm process's command line)."""
    commands = [cmd for _start, cmd in procs.values()]
    return any("--_worker" in cmd for cmd in commands) or sum("--_zygote" in cmd for cmd in commands) >= 2


# -- 1. a killed np takes its measurement down ----------------------------------------------------------------------

def test_killed_np_takes_its_local_measurement_down_before_the_device_is_free(models: MlpModels,
                                                                               tmp_path: Path) -> None:
    np_proc, _out = start_measurement(models, tmp_path, "killed")
    try:
        wait_for(lambda: worker_of(descendants(np_proc.pid)), 90, "the measuring worker to start")
        # the supervisor and its worker; np's warm zygote is left out: it is idle, holds no device lock, and ends on
        # its own SIGTERM a moment after np (its worker, forked from it, is kept)
        measuring = {pid: v for pid, v in descendants(np_proc.pid).items() if ZYGOTE_FLAG not in v[1]}
    finally:
        np_proc.kill()
        np_proc.wait()
    t0 = time.monotonic()
    lock = DeviceLock("host", 1.0, poll_s=0.05)
    lock.acquire(timeout=30)  # what the next measurement does
    try:
        left = still_running(measuring)
    finally:
        lock.release()
    assert left == [], f"the device was free while the killed np's measurement still ran: {left}"
    assert time.monotonic() - t0 < 10  # not after the measurement's own 25 s timeout


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if not sshd_available():
        if os.environ.get("NP_SKIP_SSH_TESTS") == "1":
            pytest.skip("sshd is not installed and NP_SKIP_SSH_TESTS=1")
        pytest.fail(f"The SSH tests need sshd (openssh-server). Install it: {INSTALL_COMMAND}, or set "
                    "NP_SKIP_SSH_TESTS=1 to skip these tests.", pytrace=False)
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.mark.parametrize("how", ["np killed", "connection dropped"])
def test_remote_measurement_stops_when_np_or_the_connection_is_gone(models: MlpModels, sshd: SshServer,
                                                                      tmp_path: Path, how: str) -> None:
    work = tmp_path / "device-work"
    remote = {"device": "raspberry_pi_5", "destination": f"{sshd.user}@{sshd.host}", "port": sshd.port,
              "python": sys.executable, "identity_file": str(sshd.client_key), "work_dir": str(work),
              "connect_timeout": 5}
    env = {"NP_SSH_KNOWN_HOSTS": str(sshd.known_hosts), "NP_SSH_CONFIG": "/dev/null"}
    np_proc, out = start_measurement(models, tmp_path, "remote", remote=remote, env=env)
    try:
        wait_for(lambda: worker_of(mentioning(str(work))), 90, "the device's measuring worker to start")
        on_device = mentioning(str(work))  # the bootstrap, the supervisor and the worker
        ssh_client = [pid for pid, (_s, cmd) in descendants(np_proc.pid).items() if cmd.startswith("ssh ")]
        assert len(ssh_client) == 1
        if how == "np killed":
            np_proc.kill()
        else:
            os.kill(ssh_client[0], signal.SIGKILL)
        wait_for(lambda: not still_running(on_device), 10, "the device's measuring processes to end")
        wait_for(lambda: not list(work.glob("np-measure-*")), 5, "the device's work folder to be removed")
        if how == "connection dropped":  # np reports it as a failed measurement, in one line
            assert np_proc.wait(timeout=30) == 0
            error = json.loads(out.read_text())
            assert error["code"] == "NP-DEV-502" and "\n" not in error["message"], error
    finally:
        if np_proc.poll() is None:
            np_proc.kill()
        np_proc.wait()


# -- 2. one queue per device, whatever the cache folder ------------------------------------------------------------

def test_one_queue_per_device_whatever_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NP_QUEUE_DIR")  # the real default: the folder every np process of this user finds
    device = f"np-test-{uuid.uuid4().hex[:12]}"
    folder = Path(f"/tmp/np-queue-{os.getuid()}")
    procs = []
    try:
        for name in ("a", "b"):
            env = {**os.environ, "NP_CACHE_DIR": str(tmp_path / f"cache-{name}")}
            procs.append((subprocess.Popen([sys.executable, "-c", HOLD_DEVICE, device, "1.5",
                                            str(tmp_path / f"{name}.json")], env=env), tmp_path / f"{name}.json"))
        for proc, _out in procs:
            assert proc.wait(timeout=60) == 0
        held = sorted((json.loads(out.read_text()) for _proc, out in procs), key=lambda r: float(r["start"]))
        assert held[0]["end"] <= held[1]["start"], held  # one after the other, never both at once
        assert {r["dir"] for r in held} == {str(folder)}
        info = folder.lstat()
        assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    finally:
        for proc, _out in procs:
            if proc.poll() is None:
                proc.kill()
        key = device_key(device)
        for path in folder.glob(f"{key}.*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


# -- 4. damaged queue files are warned misses ----------------------------------------------------------------------

DAMAGE = {
    "random bytes": b"\x8f\xfe\x00\xc3(garbage\xff",
    "truncated": b'{"pid": 12',
    "a list": b"[1, 2, 3]",
    "wrong types": b'{"pid": "12", "host": 5, "enqueued_ns": "soon", "expected_end": "later", "overhead_s": "abc", '
                   b'"latency_ms": ["x"]}',
    "wrong shapes": b'{"pid": 12, "host": "h", "enqueued_ns": 1, "expected_s": {"a": 1}, "expected_end": [1], '
                    b'"overhead_s": 5, "latency_ms": {"sha": "fast"}}',
    "not finite": b'{"pid": 12, "host": "h", "enqueued_ns": 1, "expected_s": NaN, "expected_end": Infinity, '
                  b'"overhead_s": [NaN], "latency_ms": {"sha": -Infinity}}',
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_queue_files_are_warned_misses_and_replaced(damage: str, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    key = device_key("dev")
    history, holder = folder / f"{key}.history.json", folder / f"{key}.holder.json"
    entry = folder / f"{key}.queue" / "1-1.json"
    entry.parent.mkdir()
    for path in (history, holder, entry):
        path.write_bytes(DAMAGE[damage])
    caplog.set_level(logging.WARNING, logger="np")

    seconds, how = expected_duration("dev", "sha", runs=10, warmup=1, timeout_s=60, directory=folder)
    assert how.startswith("rough") and seconds > 0  # a miss: the defaults
    lock = DeviceLock("dev", 1.0, directory=folder, poll_s=0.02)
    assert lock.holder() is None
    lock.acquire(timeout=5)  # the damaged queue entry is not a job ahead
    lock.release()
    record_duration("dev", "sha", overhead_s=1.5, latency_ms=2.0, directory=folder)

    assert not entry.exists() and not holder.exists()
    assert json.loads(history.read_text()) == {"overhead_s": [1.5], "latency_ms": {"sha": 2.0}}  # replaced
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for path in (history, holder, entry):
        assert str(path) in warned, warned


def test_damaged_queue_folder_items_and_a_real_measurement(models: MlpModels, tmp_path: Path, _private_queue: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    from np_optimizer.profiler.methods import get_method
    from tests.helpers import request_for

    key = device_key("host")
    _private_queue.mkdir(parents=True)
    (_private_queue / f"{key}.queue").write_text("a file where the queue folder belongs")
    (_private_queue / f"{key}.lock").mkdir()  # a folder where the lock file belongs
    (_private_queue / f"{key}.history.json").write_bytes(DAMAGE["random bytes"])
    (_private_queue / f"{key}.holder.json").write_bytes(DAMAGE["wrong shapes"])
    caplog.set_level(logging.WARNING, logger="np")
    output = get_method("on-device").profile(request_for(models, tmp_path / "job", {"num_executions": 3, "warmup": 1}))
    assert output.result_kind == "measured" and not output.partial
    history = json.loads((_private_queue / f"{key}.history.json").read_text())
    assert len(history["overhead_s"]) == 1  # written anew by this measurement
    assert (_private_queue / f"{key}.queue").is_dir() and (_private_queue / f"{key}.lock").is_file()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING and "device queue" in r.getMessage()]) >= 3
