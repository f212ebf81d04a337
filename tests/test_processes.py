"""A watched run (np_optimizer.processes.run_watched): real child processes, no torch. The stage and the elapsed time
reach the progress callback, the result and the exceptions come back, the time limit stops the child (and what it
started) with the stage, the time and the option in the message, and a child that dies says so."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from np_optimizer.errors import EstimateError, TimeLimitError, ToolError
from np_optimizer.processes import YOUNG_COLLECTION_EVERY, Watch, fewer_collections, pid_alive, run_watched, stage


def _watch(limit: float, seen: list[str]) -> Watch:
    return Watch(limit_s=limit, label="01_graph_quantize: lowering for alif_e8", option="run.detail.yaml "
                 "profile[1].time_limit", progress=seen.append, code="NP-CMP-504", rerun="run `np run --retry`")


def test_the_result_and_each_stage_come_back() -> None:
    seen: list[str] = []

    def work() -> dict[str, object]:
        stage("TOSA lowering of NPU partition 1 (tag0)")
        time.sleep(1.2)
        stage("Vela on NPU partition 1 (tag0)")
        return {"pid": os.getpid(), "sizes": [1, 2, 3]}

    result = run_watched(work, _watch(30, seen), "starting")
    assert result["sizes"] == [1, 2, 3] and result["pid"] != os.getpid()  # it ran in a child
    assert seen[0].startswith("01_graph_quantize: lowering for alif_e8 (0 s, limit 30 s): starting")
    assert any("(1 s, limit 30 s): TOSA lowering of NPU partition 1 (tag0)" in s for s in seen)
    assert "Vela on NPU partition 1 (tag0)" in seen[-1]


def test_an_exception_comes_back_as_itself_with_its_attributes_and_the_child_traceback() -> None:
    def work() -> None:
        raise EstimateError("MLIA could not estimate model.tosa", hint="see mlia.log", root_cause="vela: no")

    with pytest.raises(EstimateError) as raised:
        run_watched(work, _watch(30, []), "starting")
    assert raised.value.message == "MLIA could not estimate model.tosa" and raised.value.root_cause == "vela: no"
    assert raised.value.hint == "see mlia.log" and raised.value.code == "NP-PRF-500"
    assert "in work" in "".join(raised.value.__notes__)

    def vela_exits() -> None:
        raise SystemExit("Vela: error: unsupported operator")  # how Vela ends a compile it cannot do

    with pytest.raises(SystemExit, match="unsupported operator"):
        run_watched(vela_exits, _watch(30, []), "starting")


def test_the_time_limit_stops_the_child_and_what_it_started(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"

    def work() -> None:
        stage("Vela on NPU partition 2 (tag1)")
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        marker.write_text(str(helper.pid))
        time.sleep(60)

    seen: list[str] = []
    start = time.monotonic()
    with pytest.raises(TimeLimitError) as raised:
        run_watched(work, _watch(1.5, seen), "starting")
    assert time.monotonic() - start < 10
    error = raised.value
    assert error.code == "NP-CMP-504" and error.stage == "Vela on NPU partition 2 (tag1)" and error.limit_s == 1.5
    assert error.message.startswith("01_graph_quantize: lowering for alif_e8 was stopped after 2 s, during Vela on "
                                    "NPU partition 2 (tag1): its time limit is 1.5 s (run.detail.yaml "
                                    "profile[1].time_limit).")
    assert "Raise the time limit (run.detail.yaml profile[1].time_limit)" in str(error.hint)
    assert "np run --retry" in str(error.hint)
    helper = int(marker.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(helper) and time.monotonic() < deadline:  # killed with the child's process group
        time.sleep(0.05)
    assert not pid_alive(helper)


def test_a_child_that_dies_without_a_word_is_a_tool_error() -> None:
    def work() -> None:
        stage("Vela on NPU partition 1 (tag0)")
        os.kill(os.getpid(), signal.SIGKILL)  # the out-of-memory killer, say

    with pytest.raises(ToolError, match="ended without a result \\(signal 9\\) during Vela on NPU partition 1"):
        run_watched(work, _watch(30, []), "starting")



# A parent that forks a child and exits before the child asks for its death signal: the race a sweep killed right as it
# started a trial runs into (before the fix, that trial lived on, holding its experiment's run lock).
LATE_CHILD = r"""
import os, sys, time
from pathlib import Path
from np_optimizer.processes import dies_with_parent
parent, guard, out = os.getpid(), dies_with_parent(), Path(sys.argv[1])
if os.fork() == 0:
    while os.getppid() == parent:  # until the parent has exited
        time.sleep(0.01)
    (out / "pid").write_text(str(os.getpid()))
    guard()
    (out / "after").write_text("the child outlived its parent")
    os._exit(0)
os._exit(0)
"""


def test_a_child_whose_parent_died_before_its_death_signal_was_set_exits(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", LATE_CHILD, str(tmp_path)], timeout=60, check=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
        assert time.monotonic() < deadline, "the child never got past its parent's exit"
        time.sleep(0.05)
    child = int((tmp_path / "pid").read_text())
    while pid_alive(child):
        assert time.monotonic() < deadline, "the orphaned child is still running"
        time.sleep(0.05)
    assert not (tmp_path / "after").exists()


_CTRL_C_IN_A_FORK = """
import os, signal, subprocess, sys, time
from np_optimizer.processes import interrupt_deferred, raise_if_interrupted, sticky_interrupt
try:
    with sticky_interrupt():
        with interrupt_deferred():
            child = subprocess.Popen([sys.executable, "-c", "pass"], preexec_fn=os.getpid)  # a fork, at-fork hooks
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler ran here: nothing is raised inside the block
            child.wait()
            print("the block ended", flush=True)
        print("never: raised at the block's end", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
raise_if_interrupted()  # raised already: nothing is left pending
print("handler restored" if signal.getsignal(signal.SIGINT) is signal.default_int_handler else "handler left", flush=True)
"""


def test_a_ctrl_c_inside_a_deferred_fork_is_raised_once_after_it() -> None:
    """np sweep forks a trial's process under interrupt_deferred: a Ctrl+C there (where Python would swallow the
    KeyboardInterrupt in its at-fork handlers) ends the block first, then is raised, once. In a process of its own
    with SIGINT as a foreground np has it (a pytest-xdist worker ignores SIGINT)."""
    done = subprocess.run([sys.executable, "-c", _CTRL_C_IN_A_FORK], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.stdout.splitlines() == ["the block ended", "KeyboardInterrupt", "handler restored"], done.stderr


def test_an_owned_temp_folder_clears_those_of_processes_that_are_gone(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed np never removes its temp folder (np-measure-script-*, np-warm-*): the next one to make such a folder
    removes those whose process is gone, and keeps those of live processes."""
    import tempfile

    from np_optimizer.files import owned_temp_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"np-test-owned-{gone.pid}-abc"
    live = tmp_path / f"np-test-owned-{os.getppid()}-def"
    other = tmp_path / "np-test-owned-notapid-ghi"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "file").write_text("x")
    made = owned_temp_dir("np-test-owned-")
    assert made.is_dir() and made.parent == tmp_path and made.name.startswith(f"np-test-owned-{os.getpid()}-")
    assert not dead.exists() and live.is_dir() and other.is_dir()
    assert owned_temp_dir("np-test-owned-") != made and made.is_dir()  # this process's own are kept


def test_fewer_collections_raises_the_young_threshold_for_its_duration() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold() == (max(before[0], YOUNG_COLLECTION_EVERY), *before[1:])
        raise RuntimeError("restored even on an error")
    assert gc.get_threshold() == before
