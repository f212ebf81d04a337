"""Inline SVG charts of the HTML report, drawn by hand (no chart library, no JavaScript): horizontal bar charts per
metric, a scatter with its Pareto front, and box plots of measured samples.

Every bar carries its value as text, and estimated bars are hatched, so a chart reads without colour and in print.
Text is escaped (markupsafe); bars carry data-* attributes (checkpoint, series, value as stored) that tests read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "Series", "BudgetLine", "Point", "Box", "bar_chart", "scatter_chart", "box_chart", "pareto_front"]

WIDTH = 760
LABEL_W = 190  # room for checkpoint names left of the bars
VALUE_W = 200  # room for the value text right of the bars
BAR_H = 18
GAP = 4
GROUP_GAP = 12


@dataclass(frozen=True)
class Series:
    key: str  # stable id: "estimated|mlia|alif_e8"
    label: str  # legend text
    kind: str  # estimated | measured | static | fidelity: picks the fill (hatched for estimated)
    index: int  # colour slot


@dataclass(frozen=True)
class Bar:
    checkpoint: str
    series: str  # Series.key
    value: float  # in the chart's unit
    stored: float  # the value as stored (np report --json)
    text: str  # the label drawn on the bar


@dataclass(frozen=True)
class BudgetLine:
    value: float  # in the chart's unit
    text: str


def _fill(series: Series, chart_id: str) -> str:
    return f"url(#{chart_id}-hatch-{series.index})" if series.kind == "estimated" else f"var(--c{series.index % 6})"


def _defs(series: Sequence[Series], chart_id: str) -> str:
    """One diagonal-hatch pattern per estimated series, in the series' colour."""
    parts = []
    for s in series:
        if s.kind == "estimated":
            parts.append(f'<pattern id="{chart_id}-hatch-{s.index}" width="6" height="6" '
                         f'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
                         f'<rect width="6" height="6" fill="var(--bg)"/>'
                         f'<rect width="3" height="6" fill="var(--c{s.index % 6})"/></pattern>')
    return f"<defs>{''.join(parts)}</defs>"


def _legend(series: Sequence[Series], chart_id: str, y: float) -> str:
    items: list[str] = []
    x = float(LABEL_W)
    for s in series:
        items.append(f'<g class="legend-item"><rect x="{x}" y="{y}" width="14" height="14" fill="{_fill(s, chart_id)}" '
                     f'stroke="var(--fg)" stroke-width="0.5"/><text x="{x + 18}" y="{y + 11}">{escape(s.label)}</text>'
                     f'</g>')
        x += 24 + 6.2 * len(s.label)
    return "".join(items)


def bar_chart(chart_id: str, metric: str, title: str, unit: str, checkpoints: Sequence[str],
              series: Sequence[Series], bars: Sequence[Bar], budget: BudgetLine | None = None,
              notes: Sequence[tuple[str, str]] = ()) -> Markup:
    """Horizontal grouped bars: one group per checkpoint (in pipeline order), one bar per series with a value.
    `notes` are (checkpoint, text) drawn in place of a bar (SNR identical to the input, say)."""
    by_cp = {cp: [b for b in bars if b.checkpoint == cp] for cp in checkpoints}
    noted = {cp: text for cp, text in notes}
    shown = [cp for cp in checkpoints if by_cp[cp] or cp in noted]
    top = 8
    legend_rows = 1
    height = top + sum(max(1, len(by_cp[cp])) * (BAR_H + GAP) + GROUP_GAP for cp in shown) + 30 + 22 * legend_rows
    peak = max([b.value for b in bars] + ([budget.value] if budget else []) + [0.0])
    scale = (WIDTH - LABEL_W - VALUE_W) / (peak * 1.05) if peak > 0 else 0.0
    colours = {s.key: s for s in series}
    out = [f'<svg class="chart" role="img" data-metric="{escape(metric)}" viewBox="0 0 {WIDTH} {height:.0f}" '
           f'width="100%" xmlns="http://www.w3.org/2000/svg" aria-labelledby="{chart_id}-t">'
           f'<title id="{chart_id}-t">{escape(title)} ({escape(unit)})</title>', _defs(series, chart_id)]
    y = float(top)
    for cp in shown:
        group = by_cp[cp]
        group_h = max(1, len(group)) * (BAR_H + GAP)
        out.append(f'<text class="cp" x="{LABEL_W - 8}" y="{y + group_h / 2 + 4:.1f}" text-anchor="end">'
                   f'{escape(cp)}</text>')
        if not group:
            out.append(f'<text class="note" x="{LABEL_W + 4}" y="{y + BAR_H - 5:.1f}">{escape(noted[cp])}</text>')
        for bar in group:
            s = colours[bar.series]
            w = max(bar.value * scale, 1.0)
            out.append(f'<rect class="bar" x="{LABEL_W}" y="{y:.1f}" width="{w:.1f}" height="{BAR_H}" '
                       f'fill="{_fill(s, chart_id)}" stroke="var(--fg)" stroke-width="0.5" '
                       f'data-checkpoint="{escape(bar.checkpoint)}" data-series="{escape(bar.series)}" '
                       f'data-kind="{escape(s.kind)}" data-value="{bar.stored!r}">'
                       f'<title>{escape(bar.checkpoint)}: {escape(bar.text)} ({escape(s.label)})</title></rect>')
            out.append(f'<text class="val" x="{LABEL_W + w + 4:.1f}" y="{y + BAR_H - 5:.1f}">{escape(bar.text)}'
                       f'</text>')
            y += BAR_H + GAP
        if not group:
            y += BAR_H + GAP
        y += GROUP_GAP
    axis_y = y
    out.append(f'<line class="axis" x1="{LABEL_W}" y1="{top - 4}" x2="{LABEL_W}" y2="{axis_y:.1f}"/>')
    if budget is not None and scale > 0:
        bx = LABEL_W + budget.value * scale
        out.append(f'<g class="budget" data-budget="{budget.value!r}"><line x1="{bx:.1f}" y1="{top - 4}" '
                   f'x2="{bx:.1f}" y2="{axis_y:.1f}"/><text x="{bx:.1f}" y="{axis_y + 14:.1f}" text-anchor="middle">'
                   f'{escape(budget.text)}</text></g>')
    out.append(f'<text class="unit" x="{WIDTH - 4}" y="{axis_y + 14:.1f}" text-anchor="end">{escape(unit)}</text>')
    out.append(_legend(series, chart_id, axis_y + 22))
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class Point:
    checkpoint: str
    x: float
    y: float
    x_text: str
    y_text: str


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """Points no other point beats on both axes (lower x, higher y), by increasing x."""
    front = [p for p in points
             if not any((q.x <= p.x and q.y >= p.y) and (q.x < p.x or q.y > p.y) for q in points)]
    return sorted(front, key=lambda p: p.x)


def _axis(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


def scatter_chart(chart_id: str, points: Sequence[Point], x_label: str, y_label: str) -> Markup:
    """x (latency or size, lower is better) against y (SNR, higher is better); the Pareto front is drawn as a
    stepped line and its points as filled diamonds, the others as open circles, each labelled."""
    w, h, left, bottom, top, right = WIDTH, 340, 70, 40, 14, 170
    xs, ys = _axis([p.x for p in points]), _axis([p.y for p in points])

    def sx(v: float) -> float:
        return left + (v - xs[0]) / (xs[1] - xs[0]) * (w - left - right)

    def sy(v: float) -> float:
        return top + (1 - (v - ys[0]) / (ys[1] - ys[0])) * (h - top - bottom)

    front = pareto_front(points)
    out = [f'<svg class="chart scatter" role="img" viewBox="0 0 {w} {h}" width="100%" '
           f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{chart_id}-t"><title id="{chart_id}-t">'
           f'{escape(y_label)} against {escape(x_label)}</title>',
           f'<line class="axis" x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}"/>',
           f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}"/>']
    for value in (xs[0], (xs[0] + xs[1]) / 2, xs[1]):
        out.append(f'<text class="tick" x="{sx(value):.1f}" y="{h - bottom + 14}" text-anchor="middle">'
                   f'{value:.3g}</text>')
    for value in (ys[0], (ys[0] + ys[1]) / 2, ys[1]):
        out.append(f'<text class="tick" x="{left - 6}" y="{sy(value) + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    out.append(f'<text class="unit" x="{(left + w - right) / 2:.0f}" y="{h - 6}" text-anchor="middle">'
               f'{escape(x_label)} (lower is better)</text>')
    out.append(f'<text class="unit" x="14" y="{(top + h - bottom) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(top + h - bottom) / 2:.0f})">{escape(y_label)} (higher is better)</text>')
    if len(front) > 1:
        path = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in front)
        out.append(f'<polyline class="front" points="{path}"/>')
    for p in points:
        on = p in front
        cx, cy = sx(p.x), sy(p.y)
        mark = (f'<path d="M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} L{cx - 7:.1f},{cy:.1f} Z" '
                f'class="pt front-pt"' if on else f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" class="pt"')
        out.append(f'{mark} data-checkpoint="{escape(p.checkpoint)}" data-pareto="{str(on).lower()}" '
                   f'data-x="{p.x!r}" data-y="{p.y!r}"><title>{escape(p.checkpoint)}: {escape(p.x_text)}, '
                   f'{escape(p.y_text)}</title></{"path" if on else "circle"}>')
        out.append(f'<text class="val" x="{cx + 10:.1f}" y="{cy + 4:.1f}">{escape(p.checkpoint)}'
                   f'{" (Pareto)" if on else ""}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class Box:
    label: str
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float
    mean: float
    n: int


def box_chart(chart_id: str, boxes: Sequence[Box], unit: str, fmt: Callable[[float], str]) -> Markup:
    """One horizontal box per measured round: whiskers min..max, box q1..q3, median line, mean dot."""
    row_h, top, left, right = 44, 8, 24, 250  # the round's label sits above its box
    h = top + row_h * len(boxes) + 24
    lo = min(b.minimum for b in boxes)
    hi = max(b.maximum for b in boxes)
    pad = (hi - lo) * 0.05 or hi * 0.05 or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad

    def sx(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (WIDTH - left - right)

    out = [f'<svg class="chart box" role="img" viewBox="0 0 {WIDTH} {h}" width="100%" '
           f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{chart_id}-t"><title id="{chart_id}-t">'
           f'Measured latency per round ({escape(unit)})</title>']
    y = float(top)
    for b in boxes:
        mid = y + 28
        out.append(f'<g class="round" data-n="{b.n}" data-median="{b.median!r}">'
                   f'<text class="cp" x="{left}" y="{y + 12:.1f}">{escape(b.label)}</text>'
                   f'<line class="whisker" x1="{sx(b.minimum):.1f}" y1="{mid:.1f}" x2="{sx(b.maximum):.1f}" '
                   f'y2="{mid:.1f}"/>'
                   f'<rect class="iqr" x="{sx(b.q1):.1f}" y="{mid - 8:.1f}" width="{max(sx(b.q3) - sx(b.q1), 1):.1f}" '
                   f'height="16"/><line class="median" x1="{sx(b.median):.1f}" y1="{mid - 8:.1f}" '
                   f'x2="{sx(b.median):.1f}" y2="{mid + 8:.1f}"/>'
                   f'<circle class="mean" cx="{sx(b.mean):.1f}" cy="{mid:.1f}" r="2.5"/>'
                   f'<text class="val" x="{WIDTH - right + 8}" y="{mid + 4:.1f}">median {escape(fmt(b.median))}, '
                   f'{escape(fmt(b.minimum))}..{escape(fmt(b.maximum))} {escape(unit)}, n={b.n}</text></g>')
        y += row_h
    for value in (lo, (lo + hi) / 2, hi):
        out.append(f'<text class="tick" x="{sx(value):.1f}" y="{y + 12:.1f}" text-anchor="middle">{value:.3g}</text>')
    out.append("</svg>")
    return Markup("".join(out))
