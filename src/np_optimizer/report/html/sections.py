"""Extra sections of the HTML report: one registered function per section, the extension point for views that
grow beside the pipeline table (per-layer tables, accuracy metrics, ...).

    @html_section("per_layer", title="Per-layer breakdown", order=40)
    def per_layer(ctx: SectionContext) -> Markup | None:
        ...  # read the stored per-layer files under ctx.folder; return escaped HTML, or None to leave it out

A section is a module of this package (layer_section.py), found when the sections are first read. It reads stored
results only (no torch). Its HTML is placed in the experiment's page in `order`, after the
charts and before the post-hoc rounds (templates/experiment.html.j2, the `extra_sections` loop); build it with
markupsafe (escape user text) or a template of its own under templates/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup

from np_optimizer.records import ExperimentPage
from np_optimizer.registry import Registry

__all__ = ["SectionContext", "Section", "html_section", "html_sections", "render_sections"]


@dataclass(frozen=True)
class SectionContext:
    page: ExperimentPage  # what was read of the experiment for the page (a section reads no file)


@dataclass(frozen=True)
class Section:
    name: str  # the anchor id
    title: str
    html: Markup


SectionFunction = Callable[[SectionContext], Markup | None]
_SECTIONS: Registry[tuple[int, str, SectionFunction]] = Registry("HTML section", package="np_optimizer.report.html")


def html_section(name: str, *, title: str, order: int = 50) -> Callable[[SectionFunction], SectionFunction]:
    def register(function: SectionFunction) -> SectionFunction:
        _SECTIONS.register(name, (order, title, function))
        return function

    return register


def html_sections() -> tuple[str, ...]:
    return tuple(sorted(_SECTIONS.names(), key=lambda name: _SECTIONS.get(name)[0]))


def render_sections(context: SectionContext) -> list[Section]:
    """The registered sections that have something to show for this experiment, in order."""
    out = []
    for name in html_sections():
        _order, title, function = _SECTIONS.get(name)
        html = function(context)
        if html is not None:
            out.append(Section(name, title, Markup(html)))
    return out
