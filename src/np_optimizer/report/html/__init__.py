"""`np report --html`: one self-contained page (inline CSS and SVG, no script, no network) rendered with Jinja2
from the stored results. An experiment gives its page; a project gives one page with every experiment.

    html = render_html(record)       # the ReportRecord np report builds (with --check, its budget verdict)

Templates live in templates/ (report.html.j2 the page, experiment.html.j2 one experiment, style.css inlined);
extra sections (per-layer views, accuracy metrics) register in sections.py. Reads files only (no torch).
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.records import ExperimentPage
from np_optimizer.report.html.context import experiment_view

if TYPE_CHECKING:
    from jinja2 import Environment
    from jinja2.bccache import Bucket, BytecodeCache

    from np_optimizer.records import ReportRecord

__all__ = ["render_html", "TEMPLATES"]

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _bytecode_cache() -> BytecodeCache | None:
    """Compiled templates kept in np's cache folder ($NP_CACHE_DIR/html-templates), keyed by Jinja2 on the template
    source's checksum: compiling them is most of a cold render (about 0.1 s). A folder np cannot write is no cache."""
    import os

    from jinja2 import FileSystemBytecodeCache

    class _Quiet(FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass  # a cache that cannot be written only costs time

    folder = Path(os.environ.get("NP_CACHE_DIR") or Path.home() / ".cache" / "np") / "html-templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _Quiet(str(folder))


@functools.cache
def _environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    # autoescape: checkpoint names, warnings and tool output are text, never markup
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, bytecode_cache=_bytecode_cache())
    env.globals["inf"] = float("inf")
    return env


def render_html(record: ReportRecord, pages: list[ExperimentPage]) -> str:
    """The page of an experiment record, or of a project record (one section per experiment page), from records
    only (np_optimizer.report.pages reads what the pages need from the folders)."""
    from np_optimizer.report.tables import report_tables

    views = [experiment_view(page, prefix=f"e{index + 1}") for index, page in enumerate(pages)]
    eids = [f"exp-{index + 1}" for index in range(len(views))]  # each experiment's article id
    sweep = None
    if record.experiment is not None:
        title = f"np report: {views[0].name}"
        project_table = None
    else:
        from np_optimizer.report.html.front_section import sweep_section

        title = f"np report: project {record.project.name if record.project else ''}"
        project_table = report_tables(record)[0]
        if record.project is not None:  # the sweep's front, its points linking to the experiments' articles
            sweep = sweep_section(record.project.front, record.project.sweep_warning,
                                  {view.name: eid for view, eid in zip(views, eids)})
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return _environment().get_template("report.html.j2").render(
        title=title, views=views, eids=eids, project_table=project_table, sweep=sweep, generated=stamp,
        scope=record.scope)
