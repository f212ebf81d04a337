"""The HTML project page's sweep section: the front of the project's sweep (report/front.py's FrontView) as an inline
SVG scatter of two objectives (the first two; with one objective, it against the trial number) and the trials' table,
rendered by templates/sweep.html.j2 after the project table.

Every complete trial with both values is a point: the Pareto-optimal ones filled diamonds, joined by the front's step
line; the ones that break a constraint crosses; the others open circles. Each point is a link (`<a href="#exp-N">`)
to its experiment's article on the same page. Points carry data-* attributes (trial, experiment, pareto, feasible,
the stored values) that tests read. User text (params, experiment names, reasons) is escaped: markupsafe in the SVG,
Jinja2's autoescape in the template. No script, no network: the page stays self-contained.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from np_optimizer.config.sweep_mixed import MIXED, MOVES, SCHEME
from np_optimizer.layers.coverage import PARTIAL_MARK
from np_optimizer.records.front import LEFT_CAVEAT
from np_optimizer.records.sweep import COMPLETE, FrontPoint, FrontView, SweepObjective
from np_optimizer.report.front import (
    dominates,
    front_table,
    objective_shown,
    objective_text,
    objective_unit,
    param_text,
)

__all__ = ["SweepRow", "SweepSection", "sweep_section", "front_scatter"]

W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 360, 78, 190, 14, 44


@dataclass(frozen=True)
class SweepRow:
    number: int
    experiment: str
    anchor: str | None  # the experiment's article id on the page (None: not on the page)
    cells: list[str]
    pareto: bool
    feasible: bool
    state: str


@dataclass(frozen=True)
class SweepSection:
    """What templates/sweep.html.j2 shows: the scatter, the trials' table and its lines, or the warning alone."""

    title: str = "Sweep: trials and the Pareto front"
    columns: list[str] = field(default_factory=list)
    rows: list[SweepRow] = field(default_factory=list)
    caption: str = ""
    lines: list[str] = field(default_factory=list)  # the best per objective, the failed trials' reasons
    svg: Markup | None = None
    svg_caption: str = ""
    warning: str | None = None  # trials.json cannot be read: shown instead of the front


def sweep_section(front: FrontView | None, warning: str | None,
                  anchors: Mapping[str, str]) -> SweepSection | None:
    """The section of a project page (None: the project never ran a sweep). `anchors` maps an experiment's name to
    its article id on the page."""
    if front is None:
        return None if warning is None else SweepSection(warning=warning)
    table = front_table(front)
    rows = [SweepRow(p.number, p.experiment, anchors.get(p.experiment), cells, p.pareto, p.feasible, p.state)
            for p, cells in zip(front.trials, table.rows)]
    svg, svg_caption = front_scatter(front, anchors)
    return SweepSection(table.title, table.columns, rows, table.caption, table.footnotes, svg, svg_caption)


def _ticks(lo: float, hi: float, integers: bool) -> list[float]:
    if integers:
        step = max(1, math.ceil((hi - lo) / 6))
        return [float(v) for v in range(math.ceil(lo), math.floor(hi) + 1, step)]
    return [lo, (lo + hi) / 2, hi]


def _range(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


def _label(objective: SweepObjective) -> str:
    return f"{objective.name} ({objective_unit(objective)}; " \
           f"{'higher' if objective.direction == 'max' else 'lower'} is better)"


def _steps(front: list[tuple[float, float]], x_max: bool) -> list[tuple[float, float]]:
    """The step line through the 2-D front (sorted by x): the edge of the region its points dominate."""
    path = [front[0]]
    for (x0, y0), (x1, y1) in zip(front, front[1:]):
        path += [(x0, y1), (x1, y1)] if x_max else [(x1, y0), (x1, y1)]
    return path


def _diamond(cx: float, cy: float) -> str:
    return (f'<path class="pt front-pt" d="M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} '
            f'L{cx - 7:.1f},{cy:.1f} Z"/>')


def _cross(cx: float, cy: float) -> str:
    return (f'<path class="pt broken" d="M{cx - 5:.1f},{cy - 5:.1f} L{cx + 5:.1f},{cy + 5:.1f} M{cx - 5:.1f},'
            f'{cy + 5:.1f} L{cx + 5:.1f},{cy - 5:.1f}"/>')


def _circle(cx: float, cy: float) -> str:
    return f'<circle class="pt" cx="{cx:.1f}" cy="{cy:.1f}" r="5"/>'


def _mark(p: FrontPoint, cx: float, cy: float) -> str:
    return _diamond(cx, cy) if p.pareto else _cross(cx, cy) if not p.feasible else _circle(cx, cy)


def _legend(y: float) -> str:
    x = W - RIGHT + 24
    items = ((_diamond, "Pareto front (★)"), (_circle, "meets the constraints"), (_cross, "breaks a constraint"))
    return "".join(f'<g class="legend-item">{shape(x, y + 22 * i)}<text x="{x + 12}" y="{y + 22 * i + 4}">'
                   f'{escape(text)}</text></g>' for i, (shape, text) in enumerate(items))


def front_scatter(front: FrontView, anchors: Mapping[str, str],
                  chart_id: str = "sweep-sc") -> tuple[Markup | None, str]:
    """The scatter and its caption; (None, why) when no complete trial has the values to place it."""
    objectives = front.objectives
    if not objectives:
        return None, "The sweep has no objective to draw."
    by_trial = len(objectives) == 1
    x_obj, y_obj = (None, objectives[0]) if by_trial else (objectives[0], objectives[1])

    def x_of(p: FrontPoint) -> float | None:
        return float(p.number) if x_obj is None else _place(x_obj, p.values.get(x_obj.name))

    placed = [(p, x, y) for p in front.trials if p.state == COMPLETE
              if (x := x_of(p)) is not None and (y := _place(y_obj, p.values.get(y_obj.name))) is not None]
    drawn = {p.number for p, _x, _y in placed}
    left_out = [p for p in front.trials if p.state == COMPLETE and p.number not in drawn]
    if not placed:
        return None, "No complete trial has the values to draw yet."
    xs, ys = _range([x for _p, x, _y in placed]), _range([y for _p, _x, y in placed])

    def sx(v: float) -> float:
        return LEFT + (v - xs[0]) / (xs[1] - xs[0]) * (W - LEFT - RIGHT)

    def sy(v: float) -> float:
        return TOP + (1 - (v - ys[0]) / (ys[1] - ys[0])) * (H - TOP - BOTTOM)

    x_label = "trial number" if x_obj is None else _label(x_obj)
    out = [f'<svg class="chart scatter sweep" role="img" data-metric="sweep" viewBox="0 0 {W} {H}" width="100%" '
           f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{chart_id}-t"><title id="{chart_id}-t">'
           f'{escape(_label(y_obj))} against {escape(x_label)}</title>',
           f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/>']
    for value in _ticks(*xs, integers=x_obj is None):
        out.append(f'<text class="tick" x="{sx(value):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">'
                   f'{value:.3g}</text>')
    for value in _ticks(*ys, integers=False):
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{sy(value) + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    mid = (TOP + H - BOTTOM) / 2
    out.append(f'<text class="unit axis-label" data-axis="x" x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 8}" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text class="unit axis-label" data-axis="y" x="14" y="{mid:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {mid:.0f})">{escape(_label(y_obj))}</text>')
    out.append(_front_line(placed, x_obj, y_obj, sx, sy))
    for p, x, y in placed:
        out.append(_point(p, sx(x), sy(y), anchors, x_obj, y_obj))
    out.append(_legend(TOP + 12))
    out.append("</svg>")
    return Markup("".join(out)), _caption(front, x_obj, y_obj, left_out)


def _place(objective: SweepObjective, value: float | None) -> float | None:
    """The value in the shown unit, or None when it cannot be placed (not given, or infinite: an identical SNR)."""
    return None if value is None or not math.isfinite(value) else objective_shown(objective, value)


def _front_line(placed: list[tuple[FrontPoint, float, float]], x_obj: SweepObjective | None, y_obj: SweepObjective,
                sx: Callable[[float], float], sy: Callable[[float], float]) -> str:
    """The step line through the feasible points no other beats on the two drawn objectives (with more than two
    objectives the ★ points are the front on all of them); with one objective, a line at the best value."""
    feasible = [(x, y) for p, x, y in placed if p.feasible]
    if x_obj is None:  # the front is the best trials: drawn when they are placed (an identical SNR is not)
        best = next((y for p, _x, y in placed if p.pareto), None)
        return "" if best is None else \
            f'<line class="front" x1="{LEFT}" y1="{sy(best):.1f}" x2="{W - RIGHT}" y2="{sy(best):.1f}"/>'
    if not feasible:
        return ""
    pair = (x_obj, y_obj)
    front2d = sorted({q for q in feasible if not any(dominates(r, q, pair) for r in feasible)})
    path = _steps(front2d, x_obj.direction == "max")
    points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in path)
    return f'<polyline class="front" data-points="{len(front2d)}" points="{points}"/>'


def _point(p: FrontPoint, cx: float, cy: float, anchors: Mapping[str, str], x_obj: SweepObjective | None,
           y_obj: SweepObjective) -> str:
    shown = [f"{o.name} {objective_text(o, p.values.get(o.name))} {objective_unit(o)}"
             + (f" {PARTIAL_MARK}" if p.partial(o.metric) else "") for o in ([x_obj] if x_obj else []) + [y_obj]]
    left = next((c for c in p.caveats if c.startswith(LEFT_CAVEAT)), None)  # the layers left and the rewrite
    params = ", ".join(f"{k}={param_text(v)}" for k, v in p.params.items())
    status = "on the Pareto front" if p.pareto else ("breaks " + "; ".join(p.violations) if not p.feasible else
                                                     "meets the constraints, dominated")
    tip = f"trial {p.number} ({p.experiment}): {', '.join(shown)}; {status}; {params}" + (f"; {left}" if left else "")
    attrs = (f'data-trial="{p.number}" data-experiment="{escape(p.experiment)}" data-pareto="{str(p.pareto).lower()}" '
             f'data-feasible="{str(p.feasible).lower()}" data-violations="{escape("; ".join(p.violations))}"'
             f' data-partial="{str(left is not None).lower()}"')
    kind = _mixed_kind(p)
    if kind is not None:  # the mixed strategy: its mixed points ringed and labelled apart from the uniform ones
        attrs += f' data-kind="{"mixed" if p.formats else "uniform"}" data-formats="{escape(_formats_text(p))}"'
        tip += f"; {_formats_text(p) or kind}"
    ring = f'<circle class="mixed-ring" cx="{cx:.1f}" cy="{cy:.1f}" r="10"/>' if p.formats else ""
    body = f'{ring}{_mark(p, cx, cy)}<title>{escape(tip)}</title><text class="val" x="{cx + 9:.1f}" ' \
           f'y="{cy - 6:.1f}">#{p.number}{escape(f" {kind}" if kind else "")}</text>'
    anchor = anchors.get(p.experiment)
    if anchor is None:  # the experiment is not on this page (removed, or unreadable)
        return f'<g class="trial" {attrs}>{body}</g>'
    return f'<a class="trial" href="#{escape(anchor)}" {attrs}>{body}</a>'


def _mixed_kind(p: FrontPoint) -> str | None:
    """A mixed-strategy trial's label: its uniform format, or "mixed (k moves)"; None for other strategies."""
    scheme = p.params.get(SCHEME)
    if scheme is None:
        return None
    if str(scheme).startswith(MIXED):  # "mixed", or "mixed base" / "mixed widest" under `rest: both`
        return f"{scheme} ({p.params.get(MOVES)} moves)"
    return f"uniform {scheme}"


def _formats_text(p: FrontPoint) -> str:
    return ", ".join(f"{module}: {fmt}" for module, fmt in p.formats.items())


def _caption(front: FrontView, x_obj: SweepObjective | None, y_obj: SweepObjective,
             left_out: list[FrontPoint]) -> str:
    if x_obj is None:
        text = f"Each complete trial's {y_obj.name} by trial number; the line is the best value among the trials " \
               "that meet every constraint (★)."
    else:
        text = f"Each complete trial's {y_obj.name} against its {x_obj.name}. Diamonds (★) are the Pareto front; " \
               "the step line joins the trials that meet every constraint and that no other such trial beats on " \
               "these two objectives."
        if len(front.objectives) > 2:
            others = ", ".join(o.name for o in front.objectives[2:])
            text += f" The front counts {others} too, so a ★ trial can sit off the line."
    text += " Crosses break a constraint. Each point links to its experiment below."
    if any(p.formats for p in front.trials):
        text += " Ringed points are mixed (per-layer formats, named in their tooltip); the others are uniform."
    if left_out:
        text += " Not drawn (no value to place): " + "; ".join(
            f"trial {p.number} ({p.experiment}){': ' + p.reason if p.reason else ''}" for p in left_out) + "."
    return text
