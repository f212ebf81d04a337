"""`np projects create` calls the model's factory once, in a process of its own with a time limit, so a factory that
fails does so there (its exception's last line and the user's file:line, exit 3), not at `np run`; one that hangs is
stopped. The process runs in a session of its own: whatever the factory started is killed with it, on success too.

    parent (np)  ──  python -P -m np_optimizer.models.factory_check '{"spec", "root", "shown", "out"}'
                      └─ load_factory(spec) ──► out: {"ok": true, "inputs": [...]} | {"ok": false, "error": {...}}

The limit: `timeout`, else $NP_FACTORY_TIMEOUT (seconds), else FACTORY_TIMEOUT_S.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from np_optimizer.errors import ModelError, NotFoundError, NpError
from np_optimizer.processes import dies_with_parent
from np_optimizer.records.codec import from_dict, to_dict
from np_optimizer.records.commands import ModelSpec

__all__ = ["FACTORY_TIMEOUT_S", "TIMEOUT_ENV", "check_factory", "factory_timeout"]

FACTORY_TIMEOUT_S = 120.0
TIMEOUT_ENV = "NP_FACTORY_TIMEOUT"
_POLL_S = 0.05


def factory_timeout(timeout: float | None = None) -> float:
    if timeout is not None:
        return timeout
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        return float(text) if text.strip() and float(text) > 0 else FACTORY_TIMEOUT_S
    except ValueError:
        return FACTORY_TIMEOUT_S


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _wait_unreaped(proc: subprocess.Popen[bytes], limit: float) -> bool:
    """Wait until the child ends, leaving it a zombie (its pid, the group's id, cannot be reused yet); False on
    timeout."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(_POLL_S)
    return False


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else ""
    return ""


def check_factory(spec: ModelSpec, project_root: Path, *, label: str, shown: tuple[Path, Path] | None = None,
                  timeout: float | None = None) -> dict[str, Any]:
    """Call the factory of `spec` (its code already in `project_root`) in a child process; what it reported (the
    example inputs' shapes), or the factory's error raised here. `label`: the factory as the user named it."""
    limit = factory_timeout(timeout)
    with tempfile.TemporaryDirectory(prefix="np-factory-") as tmp:
        out, log = Path(tmp) / "result.json", Path(tmp) / "output.txt"
        payload = {"spec": to_dict(spec), "root": str(project_root), "out": str(out),
                   "shown": [str(shown[0]), str(shown[1])] if shown else None}
        command = [sys.executable, "-P", "-m", "np_optimizer.models.factory_check", json.dumps(payload)]
        with open(log, "wb") as output:
            proc = subprocess.Popen(command, cwd=project_root, stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=output, start_new_session=True,
                                    env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # the copy stays as copied
                                    preexec_fn=dies_with_parent())  # noqa: PLW1509 - only prctl, no locks
            try:
                finished = _wait_unreaped(proc, limit)
            finally:
                _kill_group(proc.pid)  # what the factory started, and the child itself on timeout or Ctrl+C
                proc.wait()
        if not finished:
            raise ModelError(f"{label} did not return within {limit:g} s; np stopped it.",
                             hint=f"A factory should only build the model (no training, no downloads that may hang); "
                                  f"to wait longer, set {TIMEOUT_ENV} (seconds) and create the project again.",
                             code="NP-MDL-504")
        try:
            result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            code = proc.returncode
            why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            last = _tail(log)
            raise ModelError(f"The process calling {label} ended without a model ({why})" + (f": {last}" if last
                             else "."), hint="Run the factory in Python to see what happened (sys.exit or a crash in "
                                             "native code ends the process).") from None
    if not result.get("ok"):
        error = result.get("error") or {}
        cls = NotFoundError if error.get("class") == "NotFoundError" else ModelError
        raise cls(str(error.get("message")), hint=error.get("hint"), code=error.get("code"))
    return result


def _child(payload: dict[str, Any]) -> dict[str, Any]:
    from np_optimizer.models.factory import load_factory

    spec = from_dict(ModelSpec, payload["spec"])
    shown = payload.get("shown")
    try:
        _model, inputs = load_factory(spec, Path(payload["root"]),
                                      shown=(Path(shown[0]), Path(shown[1])) if shown else None)
    except NpError as exc:
        return {"ok": False, "error": {"class": type(exc).__name__, "code": exc.code, "message": exc.message,
                                       "hint": exc.hint}}
    return {"ok": True, "inputs": [f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in inputs]}


if __name__ == "__main__":
    _payload = json.loads(sys.argv[1])
    _result = _child(_payload)
    Path(_payload["out"]).write_text(json.dumps(_result), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # now: threads the factory started must not keep the process (the parent kills its group anyway)
