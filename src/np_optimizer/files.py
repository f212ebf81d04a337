"""Atomic, locked JSON files: a crash or two concurrent np processes never leave a half-written or lost record.

Every write goes to a temporary file beside its target, is fsynced, renamed over the target, and the folder is
fsynced after the rename (so the rename itself survives a power cut). Files are created with the mode the user's umask
gives (0666 & ~umask), like any file the user writes, not the 0600 of a bare temporary file.

Every read of a JSON record goes through `read_json`, which returns a JSON object or raises CorruptFileError with the
reason: not UTF-8, not JSON, not an object (a list where a mapping belongs), or a folder where the file belongs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError

__all__ = ["cache_root", "owned_temp_dir", "remove_path", "sha256_file", "link_or_copy", "write_json", "write_text", "write_bytes", "read_json", "update_json", "file_lock", "fsync_dir",
           "CorruptFileError"]


class CorruptFileError(ValueError):
    """A file exists but does not read back as the record it should hold; `reason` says why, without the path."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def owned_temp_dir(prefix: str) -> Path:
    """A new folder in the system's temp folder named `<prefix><pid>-<random>`, after removing the folders of this
    prefix whose process is gone: its owner removes it at exit, but a process killed (kill -9, a crash) never does,
    and each such run used to leave one behind. A folder whose pid a live process reuses stays, harmlessly."""
    import shutil
    import tempfile

    from np_optimizer.processes import pid_alive

    with contextlib.suppress(OSError):
        for old in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
            owner = old.name[len(prefix):].split("-", 1)[0]
            if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
                shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def cache_root() -> Path:
    """The user's cache folder, shared by every workspace (estimates, compiled programs):
    $NP_CACHE_DIR, else $XDG_CACHE_HOME/np, else ~/.cache/np."""
    if os.environ.get("NP_CACHE_DIR"):
        return Path(os.environ["NP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "np"


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (os.umask would set it for every thread)."""
    with contextlib.suppress(OSError, ValueError):
        for row in Path("/proc/self/status").read_text().splitlines():
            if row.startswith("Umask:"):
                return int(row.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable (best effort: some file systems refuse fsync on folders)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync it, rename it over `path` (atomic on POSIX), fsync the folder.

    The file gets the mode a plain `open(path, "w")` would give (0666 minus the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # (on the first write: a read command does not import it)

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_text(path: Path, text: str) -> None:
    """`write_bytes` of `text` encoded as UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in `path`. A file that is not UTF-8 text, not JSON, or holds anything but an object (a list, a
    number, null), or a folder where the file belongs, raises CorruptFileError: never half a record, never a record of
    the wrong shape. A missing file raises FileNotFoundError as usual."""
    if path.is_dir():
        raise CorruptFileError(path, "is a folder, not a file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise CorruptFileError(path, f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}); "
                                     "it is damaged or not a file np wrote") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptFileError(path, f"is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError as exc:  # thousands of nested brackets
        raise CorruptFileError(path, "is not valid JSON (nested too deeply)") from exc
    if not isinstance(data, dict):
        raise CorruptFileError(path, f"holds a JSON {_json_kind(data)} where np keeps a JSON object ({{...}})")
    return data


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `.<name>.lock` beside `path`, shared by every process of the user, waited for; re-entrant
    within a thread (locks.py)."""
    from np_optimizer.locks import FileLock  # (and processes: only commands that write pay for them)

    lock_path = path.with_name(f".{path.name}.lock")  # hidden: a lock is not a result
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lock_path)
        lock.acquire(exclusive=True)
    except OSError as exc:  # a folder in its place, a read-only folder
        raise ConfigError(f"np cannot open its lock file {lock_path}: {exc.strerror or exc}.",
                          hint="Remove whatever is in its place, and check the folder is writable; np recreates it.",
                          code="NP-CFG-400") from None
    try:
        yield
    finally:
        lock.release()


def update_json(path: Path, change: Callable[[dict[str, Any]], Any], *,
                default: Callable[[], dict[str, Any]] = dict) -> Any:
    """Read-modify-write `path` under its lock; `change` returns the new document, which is written atomically."""
    with file_lock(path):
        current = read_json(path) if path.exists() else default()
        updated = change(current)
        write_json(path, updated)
        return updated


def remove_path(path: Path) -> OSError | None:
    """Delete whatever is at `path` (file, folder or link): how a damaged cache entry or queue file is discarded.
    Returns the error when it could not be removed (the caller warns and goes on without it)."""
    import shutil

    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        return exc
    return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def link_or_copy(source: Path, target: Path) -> None:
    """`target` as a hard link to `source` where the file system allows, else a copy. Safe for np's files: np
    replaces a file by rename (write_bytes) and never writes into one, so neither name can change the other's bytes;
    a cache entry is still checked against its sha256 when read."""
    import shutil

    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
