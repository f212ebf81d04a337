"""One np sweep drives a project's sweep at a time: a second one is refused with NP-SWP-409 while the first holds
sweep/sweep.lock, and gets it once the first is gone (even killed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from np_optimizer.errors import UsageError
from np_optimizer.sweep.driver import _sweep_lock
from tests.helpers import wait_for

HOLD = r"""
import sys, time
from pathlib import Path
from np_optimizer.sweep.driver import _sweep_lock
with _sweep_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("held")
    time.sleep(600)
"""


def test_a_second_sweep_is_refused_while_the_first_drives_it(tmp_path: Path) -> None:
    folder, marker = tmp_path / "sweep", tmp_path / "held"
    first = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(marker)])
    try:
        wait_for(marker.is_file, 60, "the first sweep to take the lock")
        with pytest.raises(UsageError) as refused, _sweep_lock(folder):
            pass
        assert refused.value.code == "NP-SWP-409" and "Another np sweep" in refused.value.message
        assert "--resume" in (refused.value.hint or "")
    finally:
        first.kill()
        first.wait()
    with _sweep_lock(folder):  # killed: its lock is no obstacle
        with _sweep_lock(folder):  # and nested in one thread, it is the same lock
            pass
