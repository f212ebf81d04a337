"""A warm start for measurements on this machine: one process per np process imports torch and the runtime once,
then forks a fresh worker for each measurement (about 2 s of imports saved per measured checkpoint).

    np ── starts once ──► zygote (--_zygote SOCKET: imports torch + the runtime, never runs a model)
    np ── per measurement ──► supervisor (stdlib only, as before) ── SOCKET: argv + 2 descriptors ──► zygote
                                  ▲  events on the pipe                                                  │ fork
                                  └──────────────────────────────────── worker (a fresh child process) ◄─┘

The worker is still a process of its own, started for this measurement only: its memory figures are its own
(the high-water mark is reset before the load, as in a fresh process), and the supervisor still stops it from
outside (kill by pid) when a call hangs. The zygote never runs a model, so no thread pool exists when it forks.
It dies with np (death signal, or its stdin closing); its workers die with it; a supervisor that goes away makes
it kill that supervisor's worker. Python 3.9+ (descriptor passing); elsewhere the supervisor starts the worker
as a fresh process, as it does when no zygote is given.
"""

from __future__ import annotations

import gc
import json
import os
import select
import selectors
import signal
import socket
import sys
from typing import IO, Any, List, Optional, Sequence

from .parent import set_death_signal

ZYGOTE_FLAG = "--_zygote"  # first argument: serve on the socket path that follows
_WAIT_POLL_S = 0.2


def main_zygote(path: str) -> int:
    """Import the heavy parts, then fork a worker per request on the Unix socket `path`; ends when stdin closes."""
    set_death_signal(signal.SIGTERM)
    if not hasattr(socket, "recv_fds"):
        sys.stdout.write("failed: Python %s cannot pass descriptors\n" % sys.version.split()[0])
        sys.stdout.flush()
        return 1
    try:
        import torch  # noqa: F401  (the pybindings link libtorch; the worker needs both)

        from .load import _import_pybindings, _register_quantized_kernels

        _import_pybindings()
        _register_quantized_kernels()
    except BaseException as e:  # the supervisor then starts fresh workers, which report the problem properly
        sys.stdout.write("failed %s\n" % (e,))
        sys.stdout.flush()
        return 1
    # what the imports made lives as long as this process: out of the collector's way, so a worker's gc.collect()
    # (before its load and its runs) walks only what the worker made (0.16 s less per measurement here)
    gc.collect()
    gc.freeze()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    try:
        while True:
            for key, _mask in sel.select():
                if key.fileobj is sys.stdin:
                    if not os.read(sys.stdin.fileno(), 512):  # np closed it: np is done or gone
                        return 0
                    continue
                conn, _addr = server.accept()
                with conn:
                    _serve(conn, server)
    finally:
        server.close()
        try:
            os.unlink(path)
        except OSError:
            pass


def _serve(conn: socket.socket, server: socket.socket) -> None:
    """One measurement: fork the worker with the supervisor's descriptors, tell its pid, then its exit code."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 2)
    argv: List[str] = json.loads(msg.decode("utf-8"))
    pid = os.fork()
    if pid == 0:  # the worker
        rc = 70
        try:
            conn.close()
            server.close()
            set_death_signal(signal.SIGKILL)  # dies with the zygote, which dies with np
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            sys.stdin = open(os.devnull)
            from .options import parse_options
            from .worker import main_worker

            rc = main_worker(parse_options(argv))
        finally:
            os._exit(rc)
    for fd in fds:
        os.close(fd)
    conn.sendall(b"%d\n" % pid)
    exited = _exit_fd(pid)
    conn.settimeout(None if exited is not None else _WAIT_POLL_S)
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                conn.settimeout(None)
                code = os.waitstatus_to_exitcode(status)  # a signal as its negative number, like Popen
                try:
                    conn.sendall(b"%d\n" % code)
                except OSError:
                    pass
                return
            if exited is not None:  # woken by the worker's exit or by the supervisor, at once
                ready, _, _ = select.select([conn, exited], [], [])
                if conn not in ready:
                    continue
            try:
                if not conn.recv(64):  # the supervisor is gone: nobody will read this measurement
                    os.kill(pid, signal.SIGKILL)
            except socket.timeout:
                pass
            except OSError:
                os.kill(pid, signal.SIGKILL)
    finally:
        if exited is not None:
            os.close(exited)


def _exit_fd(pid: int) -> Optional[int]:
    """A descriptor readable once the worker `pid` has exited (Linux 5.3+, Python 3.9+), so its exit is told at once;
    None elsewhere (then the wait polls every _WAIT_POLL_S, which added up to 0.2 s to each measurement)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None


class ForkedWorker:
    """The supervisor's handle on a worker the zygote forked: what it uses of a Popen (stdout, kill, wait)."""

    def __init__(self, conn: socket.socket, pid: int, stdout: IO[bytes]) -> None:
        self.conn, self.pid, self.stdout = conn, pid, stdout
        self._rc: Optional[int] = None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait(self, timeout: Optional[float] = None) -> int:
        if self._rc is None:
            self.conn.settimeout(timeout)
            data = b""
            try:
                while not data.endswith(b"\n"):
                    chunk = self.conn.recv(64)
                    if not chunk:
                        break
                    data += chunk
            except socket.timeout:
                import subprocess

                raise subprocess.TimeoutExpired("worker %d" % self.pid, timeout or 0)
            self._rc = int(data) if data.strip() else -int(signal.SIGKILL)
            self.conn.close()
        return self._rc


def start_forked(path: str, argv: Sequence[str], stderr: IO[Any]) -> Optional[ForkedWorker]:
    """Ask the zygote at `path` for a worker running `argv`; None when there is no usable zygote (then the caller
    starts a fresh process)."""
    if not hasattr(socket, "send_fds"):
        return None
    read_end, write_end = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(list(argv)).encode("utf-8")], [write_end, stderr.fileno()])
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(64)
            if not chunk:
                raise OSError("the zygote closed the connection")
            data += chunk
        pid = int(data)
    except (OSError, ValueError):
        conn.close()
        os.close(read_end)
        os.close(write_end)
        return None
    os.close(write_end)
    return ForkedWorker(conn, pid, os.fdopen(read_end, "rb"))
