"""The device queue's files read as records: anything that does not read back as a valid record (damaged, or JSON
of another shape) is a warned miss, deleted so that it is written anew (see device_queue.py for the files)."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.files import remove_path

__all__ = ["write_json", "discard", "number", "integer", "optional", "valid_holder", "valid_entry", "valid_history",
           "read_record"]

_log = logging.getLogger("np.DeviceQueue")


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def optional(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def valid_holder(data: dict[str, Any]) -> bool:
    return (integer(data.get("pid")) and optional(data.get("pid_start"), int) and isinstance(data.get("host"), str)
            and optional(data.get("label"), str) and number(data.get("expected_end", 0))
            and number(data.get("expected_s", 0)) and number(data.get("started_at", 0)))


def valid_entry(data: dict[str, Any]) -> bool:
    return (integer(data.get("pid")) and optional(data.get("pid_start"), int) and isinstance(data.get("host"), str)
            and integer(data.get("enqueued_ns")) and optional(data.get("label"), str)
            and number(data.get("expected_s", 0)))


def valid_history(data: dict[str, Any]) -> bool:
    overheads, latencies = data.get("overhead_s", []), data.get("latency_ms", {})
    return (isinstance(overheads, list) and all(number(x) and x >= 0 for x in overheads)
            and isinstance(latencies, dict) and all(number(x) and x >= 0 for x in latencies.values()))


def discard(path: Path, what: str, why: str) -> None:
    """A queue file that is not a valid record: a warned miss, deleted so that it is written anew."""
    exc = remove_path(path)
    if exc is not None:
        _log.warning(f"The device queue's {what} {path} is damaged ({why}) and could not be removed ({exc}); it is "
                     "ignored.")
        return
    _log.warning(f"The device queue's {what} {path} was damaged ({why}); it was removed and is not used.")


def read_record(path: Path, what: str, valid: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The record in `path`; None when there is none, or when it is not a valid record (then it is discarded with
    a warning)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_dir():
            discard(path, what, "a folder where a file belongs")
        else:
            _log.warning(f"The device queue's {what} {path} cannot be read ({exc}); it is ignored.")
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON
        discard(path, what, "not JSON")
        return None
    if not isinstance(data, dict) or not valid(data):
        discard(path, what, "JSON of another shape")
        return None
    return data
