"""The local pool's warm host, its own side: one process per LocalPool that imports the trial worker's heavy modules
once (torch, ExecuTorch, np's run and profile paths: the worker module's `warm()`) and then forks a fresh child per
trial, which runs the worker's `main([JOB_JSON])` as `python -m <worker> JOB_JSON` would, without the 5 to 11 s of
imports.

    np (LocalPool) ── socketpair: request + the trial's pipe (send_fds) ──► host (python -m np_optimizer.sweep.host)
          ▲  JSON lines on the pipe (progress, one TrialResult)                     │ fork, one per trial
          └────────────────────────────────────────────────────── trial child ◄────┘

Why a child per trial: a forked child starts from the host's state, and the host never runs a trial, so every trial
starts from the same clean state by construction: sys.path, sys.modules, registries, the working folder and the
environment (both sent with each request: np's at the submit, as a fresh process would get them) and memory. A trial
that fails, leaks or crashes takes only its own process down; nothing of it reaches the next trial, so no worker
needs replacing after a failure or for its memory: only the host itself could, and one that dies (the out-of-memory
killer) is replaced at the next trial (pool.py), its running trials failed with the signal.

`warm()` must not run a torch op: no OpenMP pool exists when the host forks (a pool used before a fork hangs the child's
first parallel region). The worker's `prime(argv)`, called before the host's first fork and after each fork when it has
one (the first trial waits for it instead of tracing for itself, which would double the work on a shared machine; a
trial of another backend runs meanwhile, tracing for itself as a fresh process would), computes once what every later
trial would compute again (api/trial.py: the XNNPACK pattern graphs of backends/traced_once.py) with torch at one
intra-op thread, so no pool starts either; one that leaves a thread running raises, and the host forks nothing more (it
answers the next request {"number", "refused": why}; np starts fresh processes and closes it). Right after its first
fork, the host also calls the worker's `rehearse(argv)` when it has one (api/trial.py: a small model quantized and
lowered, compile/rehearsal.py), on the core that trial leaves: what torch and ExecuTorch build on a first call, built
once for every later trial. It holds the busy lock meanwhile (busy.py, taken before that fork), so the trial's
measurement on this machine waits until it is over; the children close their copy of the lock. The child sets torch's
threads itself (`threads`: OMP_NUM_THREADS was read when torch loaded in the host, and is set in the child's environment
for what it starts).

The protocol (SOCK_SEQPACKET, one message each): the host says {"ready": true} or {"failed": why} once; then per request
{"number", "argv", "cwd", "env", "threads"} plus one descriptor (the pipe's write end: the child's stdout) it answers
{"number", "pid"} after the fork (or {"number", "refused"}, above) and {"number", "exit"} (a signal as its negative
number, like Popen) when it reaped the child. The host dies with np (death signal) and ends when np closes its end,
killing its children; each child dies with the host, so nothing outlives np.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

from np_optimizer.busy import hold_busy, release_busy
from np_optimizer.processes import dies_with_parent

__all__ = ["main", "MESSAGE_MAX"]

MESSAGE_MAX = 1 << 20  # a request carries np's environment: a few kB


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # np is gone: the death signal ends us
        control.send(json.dumps(message).encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    """`python -m np_optimizer.sweep.host WORKER_MODULE CONTROL_FD`."""
    module_name, fd = (sys.argv[1:] if argv is None else argv)[:2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is np's to handle: it stops the trials, then us
    control = socket.socket(fileno=int(fd))
    # what the host builds before its first fork (imports, the prime's traces) is kept for good: collections meanwhile
    # found 111,000 of 870,000 objects to free and took 1.8 s of the first trial's wait; they run after that fork
    gc.disable()
    try:
        module = importlib.import_module(module_name)
        warm = getattr(module, "warm", None)
        if callable(warm):
            warm()
    except BaseException as exc:  # noqa: BLE001 - the pool falls back to a fresh process per trial, saying why
        _send(control, {"failed": f"{type(exc).__name__}: {exc}"})
        return 1
    _send(control, {"ready": True})
    _serve(control, module)
    # np waits for this exit when the sweep ends: the interpreter's teardown of torch's and the rehearsal's heap took
    # 1.5 s of it, so only what an exit must do runs (atexit handlers; nothing is buffered: stdout is /dev/null)
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    os._exit(0)


def _serve(control: socket.socket, module: ModuleType) -> None:
    """Fork a child per request, report its pid and then its exit, until np closes the socket."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)  # SIGCHLD wakes the select: exits reported at once
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    die_with_host = dies_with_parent()  # looked up once, here: the child only calls it
    children: dict[int, int] = {}  # pid -> trial number
    refused: str | None = None  # why this host forks no more (its prime left a thread running)
    forked = False
    # held until the rehearsal after the first fork is over: a trial measuring on this machine waits for it (busy.py)
    busy = hold_busy() if callable(getattr(module, "rehearse", None)) else None
    try:
        while True:
            ready, _, _ = select.select([control, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 512)
            if control in ready:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(control, MESSAGE_MAX, 1)
                except OSError:
                    data, fds = b"", []
                if not data:
                    return  # np closed it: the sweep is done or gone
                request = json.loads(data)
                if not forked:  # before the first fork too: the first trial need not trace for itself
                    refused = _prime(module, request)
                if refused:  # a thread runs here now: a fork could hang; np starts fresh processes instead
                    for fd in fds:
                        os.close(fd)
                    _send(control, {"number": request["number"], "refused": refused})
                    continue
                hosts_own = (wake_r, wake_w) if busy is None else (wake_r, wake_w, busy)
                if not forked:
                    gc.freeze()  # not collected yet (after this fork): the first child's collections skip them too
                pid = _fork(module, request, fds, lambda: _child_setup(control, hosts_own, die_with_host))
                children[pid] = int(request["number"])
                _send(control, {"number": request["number"], "pid": pid})
                refused = _prime(module, request)  # after the fork: this trial does not wait; the next ones gain
                if not forked:  # beside the first trial: for the next ones
                    gc.unfreeze()
                    gc.enable()
                    if not refused and busy is not None:
                        refused = _call(module, "rehearse", request)
                    gc.collect()
                    gc.freeze()  # a child's collections skip the host's objects
                forked = True
                release_busy(busy)
                busy = None
            _reap(control, children)
    finally:
        release_busy(busy)
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _prime(module: ModuleType, request: dict[str, Any]) -> str | None:
    """The worker's `prime(argv)`, when it has one, before the host's first fork and right after each fork (while
    that trial runs): what every trial would compute again, computed once here (in one thread) for the trials forked
    next; why the host cannot fork any more when it raised."""
    return _call(module, "prime", request)


def _call(module: ModuleType, name: str, request: dict[str, Any]) -> str | None:
    """The worker's `prime` or `rehearse` on the request's argv, when it has it; why the host cannot fork any more
    when it raised."""
    step = getattr(module, name, None)
    if not callable(step):
        return None
    try:
        step(list(request["argv"]))
    except Exception as exc:  # noqa: BLE001 - said to np, which falls back to fresh processes
        return f"{type(exc).__name__}: {exc}"
    return None


def _reap(control: socket.socket, children: dict[int, int]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            _send(control, {"number": children.pop(pid), "exit": os.waitstatus_to_exitcode(status)})


def _child_setup(control: socket.socket, fds: tuple[int, ...], die_with_host: Callable[[], None]) -> None:
    """In the child, first: nothing of the host's serving is kept (its socket, its wake-up pipe, the busy lock's
    descriptor: closed, so the lock stays the host's alone), and it dies with the host."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh Python process
    gc.enable()  # the host forks its first trial with its collector off
    control.close()
    for fd in fds:
        os.close(fd)
    die_with_host()


def _fork(module: ModuleType, request: dict[str, Any], fds: list[int], setup: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's side; never returns
        _child(module, request, fds, setup)
    for fd in fds:
        os.close(fd)  # the child's copy is its stdout: the pipe ends when the child does
    return pid


def _child(module: ModuleType, request: dict[str, Any], fds: list[int], setup: Callable[[], None]) -> NoReturn:
    code = 70
    try:
        setup()
        os.dup2(fds[0], 1)
        os.close(fds[0])
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 2)  # as the cold child's stderr (DEVNULL): the run logs to its own files
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        threads = request.get("threads")
        if threads is not None:  # OMP_NUM_THREADS was read when torch loaded in the host: say it to torch too
            os.environ["OMP_NUM_THREADS"] = str(threads)
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(int(threads))
        code = int(module.main(list(request["argv"])) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the pool reads "ended without a result (exit code 70)"
        code = 70
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # what a fresh process does at its end (a measuring process it started, stopped)
            sys.stdout.flush()
        os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
