"""Views of the per-layer records: `np report --layers` (LayersRecord) and `np compare` (CompareRecord), each as a
table, --json or --plain. Text from files (module paths, class names) is printed as text, never as markup."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from np_optimizer.cli.render import line, out, print_json, print_plain, print_table, warn
from np_optimizer.cli.views.base import renderer
from np_optimizer.formats import humanize_count
from np_optimizer.layers.coverage import PARTIAL_MARK, coverage_text
from np_optimizer.layers.files import SENSITIVITY_FILE
from np_optimizer.layers.views import COST_HEADER, cost_text, layer_macs, raw_ids_text, snr_text
from np_optimizer.records import CompareRecord, LayersRecord, to_dict
from np_optimizer.records.codec import JsonValue, as_list, as_object

__all__ = ["show_layers", "show_compare"]

_LAYER_PLAIN = ["key", "module", "class", "family", "placement", "cost", "cost_unit", "spread", "share_pct",
                "overhead_cost", "macs", "util_mac_pct", "sram_access_cycles", "dram_access_cycles", "staging_bytes",
                "snr_db", "raw_ids", "reason", "estimator"]


def _placement(entry: dict[str, Any]) -> str:
    """Where the layer runs; off the accelerator, why (`CPU: <reason>`)."""
    where = entry.get("placement") or "-"
    if entry.get("reason"):
        return f"{where}: {entry['reason']}"
    return where + (" (not estimated)" if entry.get("cost") is None and "CPU" in where else "")


def show_layers(record: LayersRecord, mode: str) -> None:
    unit = record.cost.get("unit", "")
    unit = unit if isinstance(unit, str) else ""
    if mode == "json":
        print_json(to_dict(record))
        return
    if mode == "plain":
        _show_layers_plain(record, unit)
        return
    cells = [[e.get("key"), e.get("class") or "-", _placement(e), cost_text(e.get("cost"), unit),
              "-" if e.get("share_pct") is None else f"{e['share_pct']:.1f}%", cost_text(e.get("overhead_cost"), unit),
              "-" if layer_macs(e) is None else humanize_count(layer_macs(e)),
              "-" if e.get("util_mac_pct") is None else f"{e['util_mac_pct']:.2f}%", snr_text(e, record.snr),
              raw_ids_text(e, 2)]
             for e in record.layers]
    title = f"{record.checkpoint}: top {len(record.layers)} of {record.layer_count} layers by {unit} " \
            f"({record.device}, {record.method}, {record.result_kind})"
    caption = f"Total {cost_text(record.cost.get('total'), unit)} {unit}: {record.cost.get('source', '')}"
    coverage = record.coverage or {}
    if coverage.get("partial"):
        caption += f". {PARTIAL_MARK} {coverage_text(coverage)}"
    columns = ["Layer (module path)", "Class", "Placement", COST_HEADER.get(unit, unit), "Share", "Overhead",
               "MACs", "MAC util", "SNR (dB)", "Tool id"]
    if unit == "MACs":  # ranked by MACs already: the tool's MACs and utilisation columns would stay empty
        columns = columns[:6] + columns[8:]
        cells = [row[:6] + row[8:] for row in cells]
    elif unit == "ms":  # measured: each time's spread and estimator beside it; no MAC utilisation on a CPU
        columns = columns[:4] + ["IQR (ms)", "Estimator"] + columns[4:7] + columns[8:]
        cells = [row[:4] + [cost_text(e.get("spread_ms")), str(e.get("estimator") or "median")] + row[4:7] + row[8:]
                 for row, e in zip(cells, record.layers)]
    if record.layers or not record.sensitivity:
        print_table(title, columns, cells, caption=caption)
    if record.sensitivity:
        _show_sensitivity(record.checkpoint, record.sensitivity)
    line("  ", ("Overhead: the part of the layer's cost spent in ops that move or re-encode data (transpose, "
                "rescale, pad, reshape) attributed to it", "dim"))
    estimators = as_object(record.cost.get("estimators")) if record.cost.get("estimators") else {}
    for code in sorted({str(e.get("estimator")) for e in record.layers if e.get("estimator")}):
        if code in estimators:
            line("  ", (f"{code}: {estimators[code]}", "dim"))
    snr = record.snr or {}
    if snr.get("reference"):
        line("  ", ("SNR: INPUT_MODEL is the reference of every checkpoint's per-layer SNR", "dim"))
    elif snr:
        line("  ", (f"SNR: each layer's output against the same layer of {snr.get('vs')} on {snr.get('inputs')} "
                    f"inputs ({snr.get('source')}), exported programs run end to end (a layer's SNR includes the "
                    "error of the layers before it)", "dim"))
    if record.left:
        line(("Placement:", "cyan"), " ", record.left)
    for text in record.warnings:
        warn(text)
    if coverage.get("partial") and coverage.get("left_out"):
        warn("Not estimated (run on the CPU): " + ", ".join(str(as_object(e).get("key"))
                                                             for e in as_list(coverage.get("left_out"))))


def _show_layers_plain(record: LayersRecord, unit: str) -> None:
    rows = [[e.get("key"), e.get("module"), e.get("class"), e.get("family"), e.get("placement"), e.get("cost"),
             unit, e.get("spread_ms"), e.get("share_pct"), e.get("overhead_cost"), layer_macs(e),
             e.get("util_mac_pct"),
             e.get("sram_access_cycles"), e.get("dram_access_cycles"), e.get("staging_bytes"),
             "identical" if e.get("snr_identical") else e.get("snr_db"),
             " ".join(str(i) for i in as_list(e.get("raw_ids"))), e.get("reason"), e.get("estimator")]
            for e in record.layers]
    print_plain(_LAYER_PLAIN, rows, section=f"layers:{record.checkpoint}")
    if record.sensitivity:
        print_plain(["module", "format", "snr_db", "snr_loss_db", "cost", "cost_unit", "limited"],
                    [[row[0], fmt, *cell] for row in _sensitivity_rows(record.sensitivity)
                     for fmt, cell in row[1]], section=f"sensitivity:{record.checkpoint}")


def _sensitivity_rows(doc: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
    """Per layer (as the file ranks them: the largest SNR loss first), per format: SNR, loss, cost, unit, and the
    backend limit that kept some of its ops in another format."""
    unit = str(as_object(doc.get("cost")).get("unit") or "")
    formats = [str(f) for f in as_list(doc.get("formats"))]
    out = []
    for layer in (as_object(x) for x in as_list(doc.get("layers"))):
        cells = [(f, as_object(as_object(layer.get("formats")).get(f))) for f in formats]
        out.append((str(layer.get("module")), [(f, [c.get("snr_db"), c.get("snr_loss_db"), c.get("cost"), unit,
                                                    c.get("limited")]) for f, c in cells]))
    return out


def _show_sensitivity(checkpoint: str, doc: dict[str, Any]) -> None:
    """One row per weighted layer: the SNR the model loses with the layer in the base format instead of each other
    format, then the layer's cost in each format (a column per format)."""
    formats = [str(f) for f in as_list(doc.get("formats"))]
    base, cost = formats[0], as_object(doc.get("cost"))
    unit = str(cost.get("unit") or "")
    moves = {str(m.get("module")): f"{i}: {m.get('format')}"
             for i, m in enumerate((as_object(x) for x in as_list(doc.get("moves"))), 1)}
    cells = []
    for module, by_format in _sensitivity_rows(doc):
        values = dict(by_format)
        losses = [("-" if values[f][1] is None else f"{values[f][1]:+.2f}") + (" *" if values[f][4] else "")
                  for f in formats[1:]]
        cells.append([module, *losses, *(cost_text(values[f][2], unit) for f in formats), moves.get(module, "-")])
    columns = ["Layer (module path)", *(f"SNR loss vs {f} (dB)" for f in formats[1:]),
               *(f"{f} ({COST_HEADER.get(unit, unit) or 'cost'})" for f in formats), "Greedy move"]
    seconds = as_object(doc.get("seconds")).get("total")
    print_table(f"{checkpoint}: sensitivity and cost per format (all-{base} SNR {doc.get('base_snr_db')} dB)",
                columns, cells, caption=f"SNR loss: the model's output SNR with only this layer in the format, minus "
                f"the all-{base} model's. Cost: one compile of the whole model per format, {cost.get('method')} on "
                f"{cost.get('measured_on')}. Greedy move: the order in which to leave {base}, by SNR gained per "
                f"unit of extra cost (free gains first). Analysis took {seconds} s ({SENSITIVITY_FILE})." + (
                    " *: some of the layer's ops kept another format (the target's limit; the file says which)."
                    if any("*" in str(c) for row in cells for c in row[1:-1]) else ""))
    for text in as_list(doc.get("warnings")):
        warn(str(text))


def _db(value: Any, identical: bool) -> str:
    return "identical" if identical else "-" if value is None else f"{value:.1f}"


def _totals_legend(totals: Any) -> str | None:
    """The marks the table shows, explained; none when no cell carries one."""
    cells = [c for t in totals for c in t["cells"] if c]
    legend = (["n.s.: smaller than the measured spread"] if any(c.get("significant") is False for c in cells) else []) \
        + ([f"{PARTIAL_MARK}: covers the NPU part of the model only"] if any(c.get("coverage") for c in cells) else [])
    return "; ".join(legend) or None


def _cell(cell: dict[str, Any] | None, first: bool) -> str:
    if cell is None:
        return "-"
    if cell.get("identical"):
        text = "identical"
    else:
        value, unit = cell["value"], cell.get("unit")
        text = humanize_count(value) if unit in ("MACs", "B") else cost_text(float(value))
    if cell.get("coverage"):
        text += f" {PARTIAL_MARK}"
    if not first and cell.get("delta") is not None:
        pct = cell.get("delta_pct")
        if cell.get("unit") == "%":  # a share changes by points, not by a percentage of itself
            text += f" ({cell['delta']:+.1f} pt)"
        else:
            text += f" ({pct:+.1f}%)" if pct is not None else f" ({cell['delta']:+.3g})"
        if not cell.get("significant"):
            text += " n.s."
    return text


def _rows(diff: dict[str, JsonValue], key: str) -> list[dict[str, JsonValue]]:
    """A diff's rows of one kind (cost changes, placement changes, SNR drops)."""
    return [as_object(row) for row in as_list(diff.get(key))]


def show_compare(record: CompareRecord, mode: str) -> None:
    if mode == "json":
        print_json(to_dict(record))
        return
    labels = [str(c["label"]) for c in record.columns]
    if mode == "plain":
        rows = []
        for total in record.totals:
            for column, cell in zip(labels, as_list(total["cells"])):
                if isinstance(cell, dict):
                    value = "identical" if cell.get("identical") else cell.get("value")
                    rows.append([total["metric"], column, value, total["unit"], cell.get("delta", ""),
                                 "" if "significant" not in cell else cell["significant"], cell.get("coverage") or ""])
        print_plain(["metric", "checkpoint", "value", "unit", "delta", "significant", "coverage"], rows,
                    section="totals")
        for diff in record.diffs:
            print_plain(["key", "before", "after", "delta", "field", "significant"],
                        [[c["key"], c["before"], c["after"], c["delta"], c["field"],
                          "" if c.get("significant") is None else c["significant"]] for c in _rows(diff, "cost_changes")],
                        section=f"layer_cost:{diff['other']}")
            print_plain(["key", "before", "after"], [[p["key"], p["before"], p["after"]]
                                                     for p in _rows(diff, "placement_changes")],
                        section=f"layer_placement:{diff['other']}")
            print_plain(["key", "before_db", "after_db", "delta_db"],
                        [[d["key"], "identical" if d["before_identical"] else d["before"], d["after"],
                          "" if d["delta"] is None else d["delta"]] for d in _rows(diff, "snr_drops")],
                        section=f"layer_snr:{diff['other']}")
        return
    print_table("Totals (deltas against " + labels[0] + ")", ["Metric", *labels],
                [[f"{t['label']} ({t['unit']})", *(_cell(c if isinstance(c, dict) else None, i == 0) for i, c in enumerate(as_list(t["cells"])))]
                 for t in record.totals],
                caption=_totals_legend(record.totals))
    for diff in record.diffs:
        out.print()
        field = "share of the total, %" if diff["cost_field"] == "share_pct" else "cost"
        cost_changes = _rows(diff, "cost_changes")
        changes = [[str(c["key"]) + (f" (+ {', '.join(map(str, as_list(c['merged'])))} fused)" if c.get("merged") else ""),
                    c.get("class") or "-", cost_text(c["before"]), cost_text(c["after"]),
                    cost_text(c["delta"]) + (" n.s." if c.get("significant") is False else "")]
                   for c in cost_changes]
        if changes:
            spread = any(c.get("significant") is False for c in cost_changes)
            print_table(f"Layers whose {field} changed most: {diff['base']} -> {diff['other']}",
                        ["Layer", "Class", "Before", "After", "Change"], changes,
                        caption="n.s.: within the larger of the two layers' measured spreads (IQR over the traced "
                                "runs)" if spread else None)
        moves = [[p["key"], p["before"], p["after"]] for p in _rows(diff, "placement_changes")]
        if moves:
            print_table(f"Layers that moved: {diff['base']} -> {diff['other']}", ["Layer", "Before", "After"], moves)
        drops = [[d["key"], d.get("class") or "-", _db(d["before"], bool(d["before_identical"])), _db(d["after"], False),
                  "-" if d["delta"] is None else f"{d['delta']:+.1f}"] for d in _rows(diff, "snr_drops")]
        if drops:
            print_table(f"Layers whose SNR dropped most: {diff['base']} -> {diff['other']}",
                        ["Layer", "Class", "Before (dB)", "After (dB)", "Change"], drops,
                        caption="SNR of each layer's output against INPUT_MODEL's same layer; ranked by the noise "
                                "each layer gained")
        if not changes and not moves and not drops:
            line(f"{diff['base']} -> {diff['other']}: no per-layer costs or SNR to compare and no layer moved.")
    for text in record.warnings:
        warn(text)


def _printer(show: Callable[[Any, str], None], fmt: str) -> Callable[[Any, Path | None], None]:
    def render(record: Any, _target: Path | None) -> None:
        show(record, fmt)

    return render


for _fmt in ("table", "json", "plain"):  # each view prints in the three terminal formats
    renderer("layers", _fmt)(_printer(show_layers, _fmt))
    renderer("compare", _fmt)(_printer(show_compare, _fmt))
