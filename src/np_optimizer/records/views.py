"""The records of np report's other views: `--layers` (LayersRecord), np compare (CompareRecord) and the HTML page
(ExperimentPage).

Apart from report.py so that `np report`'s tables define the records they draw and not these three (each frozen
record costs about a millisecond to define at start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from np_optimizer.records.base import Record
from np_optimizer.records.codec import OMITTED_WHEN_NONE, JsonValue
from np_optimizer.records.report import BudgetVerdict, ExperimentReport

__all__ = ["LayersRecord", "CompareRecord", "ExperimentPage"]


@dataclass(frozen=True, eq=False, repr=False)
class LayersRecord(Record):
    """`np report --layers`: the costliest layers of one checkpoint's round, by module path."""

    __json_order__: ClassVar[tuple[str, ...]] = ("experiment", "checkpoint", "device", "method", "result_kind", "cost",
                                                 "coverage", "layers", "layer_count", "file", "snr", "warnings")

    experiment: str
    checkpoint: str
    device: str
    method: str
    result_kind: str
    cost: dict[str, JsonValue]
    coverage: dict[str, JsonValue] | None
    layers: tuple[dict[str, JsonValue], ...]
    layer_count: int
    file: str
    warnings: tuple[str, ...] = ()
    snr: dict[str, JsonValue] | None = None  # how the layers' snr_db was obtained (None: no per-layer SNR)
    # why ops left the accelerator, in one line (layers/reasons.py: cpu_summary); None when none left it
    left: str | None = None
    # graph_quantize's layers_sensitivity.json (pipeline/sensitivity.py): SNR loss and cost per layer and format
    sensitivity: dict[str, JsonValue] | None = field(default=None, metadata=OMITTED_WHEN_NONE)



@dataclass(frozen=True, eq=False, repr=False)
class CompareRecord(Record):
    columns: tuple[dict[str, JsonValue], ...]
    totals: tuple[dict[str, JsonValue], ...]
    diffs: tuple[dict[str, JsonValue], ...]  # one per column after the first, against the first
    warnings: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, eq=False, repr=False)
class ExperimentPage(Record):
    """What the HTML page shows of one experiment, read from its folder before rendering (the renderer reads no
    file): its report, the budgets verdict (of --check, else of run.yaml's budgets: section, shown not enforced) and
    the raw latency samples of its measured rounds, by the artifact path each round recorded, and the costliest layers
    of each checkpoint that has per-layer data."""

    name: str
    report: ExperimentReport
    verdict: BudgetVerdict | None = None
    checked: bool = False  # the verdict is --check's (enforced), not run.yaml's shown one
    budget_warning: str | None = None  # why run.yaml's budgets could not be shown
    budgets: tuple[tuple[str, float, str], ...] = ()  # (key, limit, origin) of each budget, for the charts' lines
    samples: dict[str, list[float]] = field(default_factory=dict)
    layers: tuple[LayersRecord, ...] = ()  # each profiled checkpoint's costliest layers (np report --layers)
