"""locks.py with real processes holding real flocks: shared beside shared, exclusive in the way, timeouts, nesting
within a thread, holders recorded and a dead one ignored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from np_optimizer.locks import FileLock, LockBusy, hold, holders_of
from tests.helpers import proc_stat, wait_for

# Takes the lock as argv says (exclusive or shared), writes the marker, holds for argv[4] seconds (or until killed).
HOLDER = r"""
import sys, time
from pathlib import Path
from np_optimizer.locks import hold
lock, marker, kind, seconds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
holders = Path(sys.argv[5]) if len(sys.argv) > 5 else None
with hold(lock, exclusive=kind == "exclusive", holders=holders, info={"command": "test holder"}):
    marker.write_text("held")
    time.sleep(seconds)
"""

# Tries the lock once and prints whether it got it.
TRY = r"""
import sys
from pathlib import Path
from np_optimizer.locks import FileLock
lock = FileLock(Path(sys.argv[1]))
print(lock.acquire(exclusive=sys.argv[2] == "exclusive", timeout=0))
"""


class Holders:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.children: list[subprocess.Popen[bytes]] = []

    def start(self, lock: Path, kind: str, seconds: float = 600, holders: Path | None = None) -> subprocess.Popen[bytes]:
        marker = self.tmp_path / f"held-{len(self.children)}"
        child = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(marker), kind, str(seconds),
                                  *([str(holders)] if holders else [])])
        self.children.append(child)
        wait_for(marker.is_file, 60, f"a {kind} holder to take the lock")
        return child


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[Holders]:
    found = Holders(tmp_path)
    yield found
    for child in found.children:
        child.kill()
        child.wait()


def tried_elsewhere(lock: Path, kind: str) -> bool:
    """Whether another process gets the lock at once."""
    out = subprocess.run([sys.executable, "-c", TRY, str(lock), kind], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


def test_shared_beside_shared_and_exclusive_in_the_way(tmp_path: Path, holders: Holders) -> None:
    path = tmp_path / "x.lock"
    holders.start(path, "shared")
    lock = FileLock(path)
    assert lock.acquire(exclusive=False, timeout=0)  # shared beside shared
    lock.release()
    assert not FileLock(path).acquire(exclusive=True, timeout=0)
    with pytest.raises(LockBusy), hold(path, exclusive=True, timeout=0):
        pass


def test_exclusive_blocks_until_its_holder_ends_and_a_timeout_expires(tmp_path: Path, holders: Holders) -> None:
    path = tmp_path / "x.lock"
    child = holders.start(path, "exclusive", seconds=600)
    started = time.monotonic()
    assert not FileLock(path).acquire(exclusive=False, timeout=0.5)  # not even shared beside an exclusive holder
    assert time.monotonic() - started >= 0.5
    threading.Timer(1.0, child.kill).start()
    started = time.monotonic()
    with hold(path, exclusive=True):  # waits: killed (no release of its own), its holder lets go
        assert time.monotonic() - started >= 0.9
        assert child.poll() is not None or child.wait(timeout=30) is not None
        assert not tried_elsewhere(path, "shared")


def test_nesting_takes_the_os_lock_once_and_other_threads_wait(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    fds = len(os.listdir("/proc/self/fd"))
    with hold(path, exclusive=True) as outer:
        with hold(path, exclusive=True, timeout=0) as inner:  # would wait for itself on a second descriptor
            assert inner.fileno() == outer.fileno()
            assert len(os.listdir("/proc/self/fd")) == fds + 1
        assert not tried_elsewhere(path, "shared")  # the inner release kept the lock
        got: list[bool] = []
        other = threading.Thread(target=lambda: got.append(FileLock(path).acquire(timeout=0.2)))
        other.start()
        other.join()
        assert got == [False]  # another thread is another holder
    assert tried_elsewhere(path, "exclusive")
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_nested_exclusive_converts_a_shared_lock_and_a_failed_one_keeps_it(tmp_path: Path,
                                                                            holders: Holders) -> None:
    path = tmp_path / "x.lock"
    with hold(path, exclusive=False):
        child = holders.start(path, "shared")
        assert not FileLock(path).acquire(exclusive=True, timeout=0.2)  # the other shared holder is in the way
        child.kill()
        child.wait()
        assert not tried_elsewhere(path, "exclusive")  # still held shared here
        assert tried_elsewhere(path, "shared")
        with hold(path, exclusive=True, timeout=0):  # alone now: converted
            assert not tried_elsewhere(path, "shared")
    assert tried_elsewhere(path, "exclusive")


def test_holders_are_recorded_and_a_dead_or_reused_one_ignored(tmp_path: Path, holders: Holders) -> None:
    path, folder = tmp_path / "x.lock", tmp_path / "holders"
    folder.mkdir()
    start = int(proc_stat(os.getpid())[19])  # type: ignore[index]
    reused = folder / f"{os.getpid()}.json"  # this pid, alive, but started at another time: a pid reused since
    reused.write_text(json.dumps({"pid": os.getpid(), "pid_start": start + 4242, "exclusive": True,
                                  "locked_at": time.time()}))
    (folder / "1.json").write_bytes(b"\x8f{damaged")
    child = holders.start(path, "shared", holders=folder)
    found = holders_of(folder)
    assert [(h.pid, h.exclusive, h.info) for h in found] == [(child.pid, False, {"command": "test holder"})]
    assert found[0].pid_start == int(proc_stat(child.pid)[19])  # type: ignore[index]
    assert sorted(p.name for p in folder.iterdir()) == [f"{child.pid}.json"]  # stale and damaged deleted on sight
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert (folder / f"{child.pid}.json").exists()  # killed: its record stayed ...
    assert holders_of(folder) == []  # ... and names no one
    with hold(path, exclusive=True, timeout=0, holders=folder, info={"command": "me"}) as lock:  # no obstacle
        assert [(h.pid, h.exclusive, h.info) for h in lock.holders()] == [(os.getpid(), True, {"command": "me"})]
    assert not list(folder.iterdir())


def test_a_child_handed_the_descriptor_keeps_the_lock(tmp_path: Path) -> None:
    """Release closes, never unlocks: the device queue hands the descriptor to the measuring process."""
    path = tmp_path / "x.lock"
    lock = FileLock(path)
    assert lock.acquire(timeout=0)
    fd = lock.fileno()
    assert fd is not None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], pass_fds=(fd,))
    try:
        lock.release()
        assert lock.fileno() is None
        assert not tried_elsewhere(path, "exclusive")
    finally:
        child.kill()
        child.wait()
    assert tried_elsewhere(path, "exclusive")
