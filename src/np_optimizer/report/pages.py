"""What the HTML page needs from the experiment folders, read into ExperimentPage records before rendering: each
experiment's report, its budgets verdict (--check's, else run.yaml's budgets: section, shown not enforced) and the raw
samples of its measured rounds, and each profiled checkpoint's costliest layers."""

from __future__ import annotations

import json
from pathlib import Path

from np_optimizer.config.budgets import load_budgets
from np_optimizer.errors import NpError
from np_optimizer.records import ExperimentPage, ExperimentReport, ReportRecord
from np_optimizer.report.budgets import check_budgets
from np_optimizer.report.layers import checkpoint_layers
from np_optimizer.report.model import build_experiment_report, measured_rounds
from np_optimizer.workspace.layout import Experiment, Project
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["experiment_pages", "LAYERS_SHOWN"]

LAYERS_SHOWN = 10  # per checkpoint in the page; np report --layers CHECKPOINT --top N shows more


def experiment_pages(record: ReportRecord) -> list[ExperimentPage]:
    """The pages of an experiment record (one), or of a project record (one per readable experiment)."""
    if record.experiment is not None:
        return [_page(record.experiment, Path(record.folder), record)]
    pages = []
    for exp in Project(Path(record.folder)).experiments():
        try:
            built = build_experiment_report(ExperimentStore(exp).read_index())
        except NpError:  # the project table says "unreadable"; the page goes on with the others
            continue
        pages.append(_page(built, exp.root, None))
    return pages


def _page(report: ExperimentReport, folder: Path, record: ReportRecord | None) -> ExperimentPage:
    name = report.experiment.name
    samples = _samples(report, folder)
    layers = checkpoint_layers(Experiment(folder), LAYERS_SHOWN)
    if record is not None and record.budgets is not None:
        limits = tuple(dict.fromkeys((o.budget, o.limit, o.origin) for o in record.budgets.outcomes))
        return ExperimentPage(name, report, record.budgets, checked=True, samples=samples, budgets=limits,
                              layers=layers)
    try:
        budgets = load_budgets(folder / "run.yaml")
    except NpError as error:
        return ExperimentPage(name, report, budget_warning=f"run.yaml's budgets: are not shown: {error.message}",
                              samples=samples, layers=layers)
    verdict = check_budgets(report, budgets) if budgets else None
    return ExperimentPage(name, report, verdict, samples=samples,
                          budgets=tuple((b.key, b.limit, b.origin) for b in budgets), layers=layers)


def _samples(report: ExperimentReport, folder: Path) -> dict[str, list[float]]:
    """The raw latency samples of each measured round that recorded a file of them (unreadable files left out)."""
    found: dict[str, list[float]] = {}
    for result in measured_rounds(report):
        raw = result.artifacts.get("raw")
        if not raw:
            continue
        try:
            data = json.loads((folder / raw).read_text())
            found[str(raw)] = [float(x) for x in data.get("samples_ms") or []]
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return found
