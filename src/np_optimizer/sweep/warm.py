"""The local pool's side of its warm host (host.py: why and how): start it, ask it for a trial's process, hear of
that process's end. A `ForkedTrial` is what the pool uses of a Popen (pid, stdout, wait, terminate, kill), so the
trial's lines are read as a cold child's are (worker.read_events).

$NP_SWEEP_WARM=0 turns it off (every trial a fresh `python -m <worker>` process, the old way: bench/sweep_cost.py
compares the two). A host that cannot start (no fork, no descriptor passing, an import that fails) leaves the pool
with fresh processes: it is a speed-up, never a requirement.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from np_optimizer.busy import BUSY_ENV
from np_optimizer.files import owned_temp_dir
from np_optimizer.processes import dies_with_parent, interrupt_deferred
from np_optimizer.sweep.host import MESSAGE_MAX

__all__ = ["WarmHost", "ForkedTrial", "HostUnavailable", "warm_turned_off"]

READY_TIMEOUT_S = 300.0  # the imports, on a loaded machine


class HostUnavailable(Exception):
    """The warm host could not start or is gone; the message says why."""


def warm_turned_off() -> bool:
    return os.environ.get("NP_SWEEP_WARM", "1") == "0"


class ForkedTrial:
    """A trial's process forked by the warm host: its pid, its stdout (the pipe), its exit as the host reports it."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"trial process {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _signal(self, signum: int) -> None:
        if self.returncode is None:  # not reaped yet: the pid is still this trial's
            with contextlib.suppress(OSError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)


class WarmHost:
    """One warm host process (`python -m np_optimizer.sweep.host MODULE FD`) and the thread that hears it."""

    def __init__(self, module: str, threads: int | None, *, wait: bool = True) -> None:
        """Start the host and (with `wait`) wait for its imports; HostUnavailable when it cannot serve. `threads`:
        torch's threads per trial, given to the host's environment too (OMP_NUM_THREADS is read when torch loads).
        Without `wait`, its imports overlap the caller's work until `ready()` (the first `start` calls it)."""
        if not hasattr(os, "fork") or not hasattr(socket, "send_fds") or not hasattr(socket, "SOCK_SEQPACKET"):
            raise HostUnavailable("this Python cannot fork a process and pass it a descriptor")
        self.forked = 0  # trials started by this host: a test's and the bench's evidence
        self.ready_s = 0.0  # from its start to the end of its imports
        started = time.monotonic()
        self._lock = threading.Lock()
        self._trials: dict[int, ForkedTrial] = {}  # by trial number, until the host reports its end
        self._replied = threading.Condition(self._lock)
        self._gone = False  # the listening thread heard the host's end
        self._ready = False  # its imports are done: it reads the socket
        self._refused: str | None = None  # why it stopped forking (host.py's prime), when it said
        try:
            self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as exc:
            raise HostUnavailable(f"no Unix socket pair: {exc}") from exc
        # the lock the host holds while it rehearses beside the first trial; the trials' measurements wait for it
        self._busy_dir = owned_temp_dir("np-host-busy-")  # a killed sweep's is removed by the next one
        self._busy_file = str(self._busy_dir / "lock")
        Path(self._busy_file).touch()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", BUSY_ENV: self._busy_file}
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        try:
            # a Popen with a preexec_fn runs Python's at-fork handlers here: a Ctrl+C landing in one would be printed
            # ("Exception ignored in ...") and swallowed, so it is taken once the fork is done (processes.py)
            with interrupt_deferred():
                self.proc = subprocess.Popen([sys.executable, "-m", "np_optimizer.sweep.host", module,
                                              str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env,
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL,
                                             preexec_fn=dies_with_parent())  # noqa: PLW1509 - only prctl, no locks
        except OSError as exc:
            self._control.close()
            shutil.rmtree(self._busy_dir, ignore_errors=True)
            raise HostUnavailable(f"it could not start: {exc}") from exc
        except KeyboardInterrupt:  # Ctrl+C during the fork: the host that just started goes with the sweep
            self._control.close()
            shutil.rmtree(self._busy_dir, ignore_errors=True)
            if getattr(self, "proc", None) is not None:
                self.proc.kill()
                self.proc.wait()
            raise
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self._started = started
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait for the host's imports (at once when it is serving); HostUnavailable (the host closed) when it
        failed or said nothing."""
        if self._ready:
            return
        try:
            first = self._first_message()
        except BaseException:  # Ctrl+C during the imports, or a host that said nothing: it goes
            self.close()
            raise
        if not first.get("ready"):
            self.close()
            raise HostUnavailable(str(first.get("failed") or "it ended during its imports"))
        self._ready = True
        self.ready_s = time.monotonic() - self._started
        threading.Thread(target=self._listen, daemon=True, name="np-warm-host").start()

    def _first_message(self) -> dict[str, Any]:
        self._control.settimeout(READY_TIMEOUT_S)
        try:
            data = self._control.recv(MESSAGE_MAX)
        except TimeoutError:
            return {"failed": f"its imports took more than {READY_TIMEOUT_S:g} s"}
        except OSError as exc:
            return {"failed": str(exc)}
        finally:
            self._control.settimeout(None)
        message: dict[str, Any] = json.loads(data) if data else {}
        return message

    def start(self, number: int, argv: list[str], threads: int | None,
              env: dict[str, str] | None = None) -> ForkedTrial:
        """A fresh child of the host running the worker's main(argv) for trial `number`, np's environment (plus
        `env`) and working folder as they are now; HostUnavailable when the host is gone."""
        self.ready()
        read_end, write_end = os.pipe()
        trial = ForkedTrial(0, os.fdopen(read_end, "rb"))
        request = {"number": number, "argv": argv, "cwd": os.getcwd(), "threads": threads,
                   "env": {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1", BUSY_ENV: self._busy_file}}
        with self._lock:
            self._trials[number] = trial  # before the request: its pid and its exit may follow at once
        try:
            socket.send_fds(self._control, [json.dumps(request).encode("utf-8")], [write_end])
        except OSError as exc:
            self._forget(number, trial)
            raise HostUnavailable(f"it is gone ({exc})") from exc
        finally:
            os.close(write_end)  # the host holds it now; ours would keep the pipe open after the child's end
        with self._replied:
            # READY_TIMEOUT_S: the host may be priming (after its previous fork) before it reads this request
            self._replied.wait_for(lambda: trial.pid or trial.returncode is not None or self._gone
                                   or self._refused is not None, READY_TIMEOUT_S)
        if not trial.pid:
            self._forget(number, trial)
            raise HostUnavailable(self._refused or "it did not start the trial")
        self.forked += 1
        return trial

    def _forget(self, number: int, trial: ForkedTrial) -> None:
        with self._lock:
            self._trials.pop(number, None)
        trial.stdout.close()

    def _listen(self) -> None:
        """The host's replies: a trial's pid, then its exit; when the host is gone, every trial it had is over."""
        while True:
            try:
                data = self._control.recv(MESSAGE_MAX)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            number = int(message["number"])
            with self._replied:
                trial = self._trials.get(number)
                if trial is not None and "pid" in message:
                    trial.pid = int(message["pid"])
                elif trial is not None and "exit" in message:
                    del self._trials[number]
                    trial._exited(int(message["exit"]))
                elif "refused" in message:  # it forks nothing more: the trial starts as a fresh process
                    self._refused = str(message["refused"])
                self._replied.notify_all()
        with self._replied:
            self._gone = True
            for trial in self._trials.values():  # its children died with it (death signal)
                trial._exited(-int(signal.SIGKILL))
            self._trials.clear()
            self._replied.notify_all()

    def alive(self) -> bool:
        return not self._gone and self.proc.poll() is None

    def close(self) -> None:
        """Stop the host (it kills what it still runs); its trials' exits are told first when they are already over."""
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)  # wakes the listening thread; the host reads its end
        if not self._ready:  # still importing (Ctrl+C meanwhile): it would not read the socket until done
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._control.close()
        shutil.rmtree(self._busy_dir, ignore_errors=True)
