"""Where a project's sweep keeps its state: `<project>/sweep/` holds the Optuna journal (study.journal), the trials
record that the reports read (trials.json), and the lock that lets one `np sweep` at a time drive the study."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.errors import StoreError
from np_optimizer.files import CorruptFileError, read_json, write_json
from np_optimizer.records.codec import from_dict
from np_optimizer.records.sweep import SweepRecord

__all__ = ["SWEEP_DIR", "TRIALS_FILE", "JOURNAL_FILE", "LOCK_FILE", "sweep_dir", "read_sweep_record",
           "write_sweep_record", "repair_journal"]

SWEEP_DIR = "sweep"
TRIALS_FILE = "trials.json"
JOURNAL_FILE = "study.journal"
LOCK_FILE = "sweep.lock"


def sweep_dir(project_root: Path) -> Path:
    return project_root / SWEEP_DIR


def read_sweep_record(project_root: Path) -> SweepRecord | None:
    """The project's sweep record, None when it never ran a sweep. A damaged file is NP-RPT-500 with the way out."""
    path = sweep_dir(project_root) / TRIALS_FILE
    try:
        data = read_json(path)
        return from_dict(SweepRecord, data)
    except FileNotFoundError:
        return None
    except (CorruptFileError, KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"{path} cannot be read: {exc}",
                         hint="np sweep --resume rebuilds it from the study journal (sweep/study.journal).") from exc


def write_sweep_record(project_root: Path, record: SweepRecord) -> None:
    write_json(sweep_dir(project_root) / TRIALS_FILE, record.to_json())


def repair_journal(path: Path) -> None:
    """A journal cut in the middle of a line (kill -9 while Optuna appended) loses that line only; its lock file left
    behind by the killed process is removed (the caller holds the sweep's own lock, so no writer can be alive)."""
    lock = Path(str(path) + ".lock")
    if lock.is_symlink() or lock.exists():
        lock.unlink()
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
