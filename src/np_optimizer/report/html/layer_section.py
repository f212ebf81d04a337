"""The HTML report's per-layer section: for each checkpoint whose round has per-layer costs (cycles estimated on an
Ethos-U NPU, time measured on a CPU), its costliest layers by module path, the same rows as `np report --layers`.
Every text from the files (module paths, class names, warnings) is escaped."""

from __future__ import annotations

from collections.abc import Mapping

from markupsafe import Markup, escape

from np_optimizer.formats import humanize_count
from np_optimizer.layers.views import COST_HEADER, cost_text, layer_macs, raw_ids_text, snr_text
from np_optimizer.records import LayersRecord
from np_optimizer.report.html.sections import SectionContext, html_section

__all__ = ["per_layer"]


def _placement(entry: Mapping[str, object]) -> str:
    """Where the layer runs; off the accelerator, why (`CPU: <reason>`), as np report --layers says it."""
    where = str(entry.get("placement") or "-")
    return f"{where}: {entry['reason']}" if entry.get("reason") else where


def _table(record: LayersRecord) -> Markup:
    unit = str(record.cost.get("unit") or "")
    measured = unit == "ms"
    head = ["Layer (module path)", "Class", "Placement", COST_HEADER.get(unit, unit)] \
        + (["IQR (ms)", "Estimator"] if measured else []) + ["Share", "MACs", "SNR (dB)", "Tool ops"]
    about = record.cost.get("estimators")
    estimators = about if isinstance(about, dict) else {}
    rows = []
    for e in record.layers:
        macs = layer_macs(e)
        cells: list[tuple[str, bool]] = [(str(e.get("key")), False), (str(e.get("class") or "-"), False),
                                         (_placement(e), False), (cost_text(e.get("cost"), unit), True)]
        if measured:  # how the time was obtained; its code explained on hover (cost.estimators)
            code = str(e.get("estimator") or "median")
            cells += [(cost_text(e.get("spread_ms")), True),
                      (Markup('<abbr title="{}">{}</abbr>').format(estimators.get(code, code), code), False)]
        cells += [("-" if e.get("share_pct") is None else f"{e['share_pct']:.1f}%", True),
                  ("-" if macs is None else humanize_count(macs), True), (snr_text(e, record.snr), True),
                  (raw_ids_text(e, 3), False)]
        rows.append(Markup("<tr>") + Markup("").join(
            Markup('<td class="num">{}</td>' if num else "<td>{}</td>").format(text) for text, num in cells)
            + Markup("</tr>"))
    title = f"{record.checkpoint}: top {len(record.layers)} of {record.layer_count} layers by {unit} " \
            f"({record.device}, {record.method}, {record.result_kind})"
    source = f"Total {cost_text(record.cost.get('total'), unit)} {unit}: {record.cost.get('source', '')}"
    notes = Markup("").join(Markup("<li>{}</li>").format(w) for w in record.warnings)
    left = Markup('<p class="left">{}</p>').format(record.left) if record.left else Markup("")
    return (Markup('<h4 data-checkpoint="{}">{}</h4>').format(record.checkpoint, title)
            + Markup('<table class="data layers"><thead><tr>')
            + Markup("").join(Markup('<th scope="col">{}</th>').format(h) for h in head)
            + Markup("</tr></thead><tbody>") + Markup("").join(rows) + Markup("</tbody></table>")
            + Markup('<p class="caption">{} More: <code>np report --layers {} --top N</code>.</p>').format(
                source, record.checkpoint)
            + left + (Markup('<ul class="warnings">{}</ul>').format(notes) if notes else Markup("")))


@html_section("per_layer", title="Where the time goes: per-layer breakdown", order=40)
def per_layer(ctx: SectionContext) -> Markup | None:
    if not ctx.page.layers:
        return None
    return Markup("").join(_table(record) for record in ctx.page.layers) + Markup(
        '<p class="caption">{}</p>').format(escape(
            "Each layer's cost with what a delegate or the compiler inserted for it (transposes, re-quantization) "
            "attributed to it; rows no layer owns (delegate overhead, runtime framing, time outside execute) are listed "
            "as such."))
