"""np ends without the interpreter's teardown (cli/main.py's _exit: 1 to 2 s after an np run), yet does what an exit
must: the atexit handlers run (the warm measuring process stopped, temporary folders removed), the console's buffered
output is flushed, the exit code is the command's, and a thread still working is waited for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import atexit, sys, threading, time
    from pathlib import Path
    from np_optimizer.cli.main import _exit
    marker = Path(sys.argv[1])
    atexit.register(lambda: marker.write_text("atexit ran"))
    if len(sys.argv) > 2:  # a thread that is not a daemon, still writing when the command returns
        threading.Thread(target=lambda: (time.sleep(0.3), Path(sys.argv[2]).write_text("done"))).start()
    sys.stdout.write("no newline, still buffered")
    _exit(3)
''')


def test_np_exits_with_its_code_after_atexit_and_flushes(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(marker)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline, still buffered"
    assert marker.read_text() == "atexit ran"


def test_a_running_thread_is_waited_for(tmp_path: Path) -> None:
    marker, thread_file = tmp_path / "marker", tmp_path / "thread"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(marker), str(thread_file)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert thread_file.read_text() == "done" and marker.read_text() == "atexit ran"
