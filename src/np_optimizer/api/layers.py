"""np report --layers and np compare: the experiments resolved from the arguments, then the joins of
np_optimizer.report.layers over their stored files."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.errors import UsageError
from np_optimizer.records import CompareRecord, LayersRecord
from np_optimizer.report.layers import compare_record, layers_record
from np_optimizer.workspace import resolve_experiment

__all__ = ["LayersRecord", "CompareRecord", "layers_report", "compare"]


def layers_report(*, checkpoint: str | None = None, experiment: str | None = None, top: int = 10,
                  cwd: Path | None = None) -> LayersRecord:
    """The `top` costliest layers of `checkpoint` (default: the last profiled one), by module path."""
    if top < 1:
        raise UsageError(f"--top must be 1 or more, not {top}.", hint="For example --top 20.", code="NP-RPT-400")
    return layers_record(resolve_experiment(experiment, None, cwd or Path.cwd()), checkpoint, top)


def compare(*, checkpoints: list[str] | None = None, experiment: str | None = None,
            others: list[str] | None = None, cwd: Path | None = None) -> CompareRecord:
    """Totals of every chosen checkpoint with deltas against the first, then the layer diff of each against it;
    `others` name more experiments of the project (or their folders)."""
    here = cwd or Path.cwd()
    exp = resolve_experiment(experiment, None, here)
    resolved = [resolve_experiment(name, None, exp.root.parent if not Path(name).is_dir() else here)
                for name in others or []]
    return compare_record(exp, list(checkpoints or []), resolved)
