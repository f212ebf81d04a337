"""The layer views' joins, from stored files only: `np report --layers` (a checkpoint's costliest layers, with the
per-layer SNR) and `np compare` (totals with deltas, and the layer diff against the first checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from np_optimizer.errors import NotFoundError, NpError, UsageError
from np_optimizer.layers.coverage import BOUNDARY_OPS
from np_optimizer.layers.files import aggregate, layers_path, read_layers, read_numerics, read_sensitivity
from np_optimizer.layers.graph import GRAPH_FILE
from np_optimizer.layers.host_times import RUNTIME_REASONS
from np_optimizer.layers.reasons import cpu_summary, layer_reasons, read_graph
from np_optimizer.layers.views import compare_totals, layer_diff, top_layers
from np_optimizer.profiler.methods.base import METHODS
from np_optimizer.records.codec import to_dict
from np_optimizer.records.parts import NO_COMPILE
from np_optimizer.records.report import RowMetric
from np_optimizer.records.status import RoundStatus
from np_optimizer.records.views import CompareRecord, LayersRecord
from np_optimizer.report.model import PipelineRow, build_experiment_report
from np_optimizer.workspace.layout import Experiment
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["layers_record", "checkpoint_layers", "compare_record", "left_summary"]


def _rows(exp: Experiment) -> list[PipelineRow]:
    """The pipeline rows, each with the newest successful round of its checkpoint that has per-layer data (np run's
    own, or a later np profile of the same checkpoint version) as its profile."""
    built = build_experiment_report(ExperimentStore(exp).read_index())
    for row in built.rows:
        sha = row.profile.checkpoint_sha256 if row.profile is not None else None
        own = [row.profile] if row.profile is not None else []
        rounds = [r for r in [*own, *built.post_hoc_all] if r.checkpoint == row.checkpoint
                  and r.status == RoundStatus.SUCCESS and r.artifacts.get("layers")
                  and (sha is None or r.checkpoint_sha256 in (None, sha))]
        if rounds:
            newest = max(rounds, key=lambda r: r.started_at)
            if newest is not row.profile:
                row.profile = newest
                for metric in newest.metrics:
                    row.metrics[metric.metric_type] = RowMetric.of(metric, method=newest.method,
                                                                   result_kind=newest.result_kind)
    return built.rows


def _pick(rows: list[PipelineRow], checkpoint: str | None, exp: Experiment) -> PipelineRow:
    """The row of CHECKPOINT (a checkpoint name, OUTPUT_MODEL, or a job folder name); default: the last profiled."""
    profiled = [r for r in rows if r.profile and r.profile.status == RoundStatus.SUCCESS]
    if checkpoint is None:
        if not profiled:
            raise NotFoundError(f"No checkpoint of {exp.name} has been profiled.", hint="Run `np run` (with a "
                                "profile: section) or `np profile`.", code="NP-RPT-404")
        return profiled[-1]
    return _named(rows, checkpoint, exp)


def _named(rows: list[PipelineRow], checkpoint: str, exp: Experiment) -> PipelineRow:
    wanted = checkpoint.upper()
    if wanted == "OUTPUT_MODEL":
        steps = [r for r in rows if r.checkpoint != "INPUT_MODEL"]
        wanted = steps[-1].checkpoint if steps else "INPUT_MODEL"
    row = next((r for r in rows if r.checkpoint == wanted or r.model == checkpoint), None)
    if row is None:
        names = ", ".join(r.checkpoint for r in rows)
        raise UsageError(f"{exp.name} has no checkpoint '{checkpoint}'.", hint=f"Checkpoints: {names}.",
                         code="NP-RPT-400")
    return row


def _document(exp: Experiment, row: PipelineRow) -> dict[str, Any]:
    result = row.profile
    path = layers_path(exp.root, result) if result and result.status == RoundStatus.SUCCESS else None
    if path is None:
        raise NotFoundError(f"{row.checkpoint} of {exp.name} has no per-layer data"
                            + (" (it was not profiled)." if not result else f" (its {result.method} round "
                               "gives none, or was made by an older np)."),
                            hint="On an Ethos-U device: `np profile " + row.checkpoint + " --force`.",
                            code="NP-RPT-404")
    return read_layers(path) | {"_file": str(path.relative_to(exp.root))}


def _no_costs_reason(row: PipelineRow) -> str:
    """Why a checkpoint has no per-layer costs, in the terms of its round."""
    result = row.profile
    if not result:
        return "not profiled (np profile CHECKPOINT)"
    method = METHODS.find(result.method)
    reason = method.no_layer_costs(to_dict(result)) if method is not None else None
    if reason:
        return reason
    return f"its {result.method} round has no per-layer file (made by an older np? `np profile CHECKPOINT --force`)"


def _graph_document(exp: Experiment, row: PipelineRow) -> dict[str, Any] | None:
    """Without per-layer costs (a CPU device's mlia round gives none): the compile's layers, ranked by MACs, with
    where each runs, so the ops not delegated are still named by module path."""
    path = _graph_path(exp, row)
    try:
        graph = json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        graph = None
    if not isinstance(graph, dict) or not graph.get("ops"):
        return None
    backend = str((row.lowering or NO_COMPILE).device or "the device")
    rows = [{k: op.get(k) for k in ("key", "module", "class", "family", "op_family", "overhead")}
            | {"raw_id": op.get("id"), "graph_macs": op.get("macs"),
               "placement": "delegated" if op.get("delegated") else "CPU"}
            for op in graph["ops"] if op.get("delegated") or not any(b in str(op.get("op")) for b in BOUNDARY_OPS)]
    return {"result_kind": "static", "cost": {"field": "graph_macs", "unit": "MACs", "total": sum(
        int(r["graph_macs"] or 0) for r in rows), "source": f"{graph.get('macs_convention')}; no per-layer time or "
        f"cycles on {backend} ({_no_costs_reason(row)}): layers ranked by MACs"},
        "coverage": None, "layers": aggregate(rows, "graph_macs"), "rows": rows,
        "warnings": ["No per-layer cost for this checkpoint on this device: the ranking is by MACs (a static "
                     "count), with each layer's placement from the compile."],
        "_file": str(path.relative_to(exp.root)) if path is not None else ""}


def checkpoint_layers(exp: Experiment, top: int) -> tuple[LayersRecord, ...]:
    """The `top` costliest layers of every checkpoint whose round has per-layer costs (the HTML report's section);
    a checkpoint whose per-layer file cannot be read is left out (np report --layers CHECKPOINT says why)."""
    rows = _rows(exp)
    out = []
    for row in rows:
        if row.profile and row.profile.status == RoundStatus.SUCCESS and row.profile.artifacts.get("layers"):
            try:
                out.append(layers_record(exp, row.checkpoint, top, rows=rows))
            except NpError:
                continue
    return tuple(out)


def layers_record(exp: Experiment, checkpoint: str | None, top: int, *,
                  rows: list[PipelineRow] | None = None) -> LayersRecord:
    """The `top` costliest layers of `checkpoint` (default: the last profiled one)."""
    rows = _rows(exp) if rows is None else rows
    if not rows:
        raise NotFoundError(f"{exp.name} has no checkpoints yet.", hint="Run it first: `np run`.", code="NP-RPT-404")
    row = _pick(rows, checkpoint, exp) if checkpoint or any(
        r.profile and r.profile.status == RoundStatus.SUCCESS for r in rows) else rows[-1]
    sensitivity, unread = read_sensitivity(exp.root / row.model) if row.model else (None, None)
    try:
        doc = _document(exp, row)
    except NotFoundError as missing:
        fallback = _graph_document(exp, row)
        if fallback is None and sensitivity is None:
            raise
        doc = fallback or {"layers": [], "_file": "", "warnings": [f"{missing.message} Only its per-format "
                                                                   "sensitivity and cost are shown."]}
    result = row.profile
    numerics, unreadable = read_numerics(exp.root, row.fidelity)
    snr = _snr_by_key(numerics)
    layers = [entry | _snr_fields(snr.get(entry["key"])) if snr else entry for entry in top_layers(doc, top)]
    graph = read_graph(_graph_path(exp, row))
    reasons = layer_reasons(graph)  # why each layer left the accelerator, from the compile's layers_graph.json
    layers = [entry | {"reason": reasons[entry["key"]]} if entry["key"] in reasons
              and "CPU" in str(entry.get("placement")) else entry for entry in layers]
    layers = [entry | {"reason": RUNTIME_REASONS[entry["key"]]} if entry.get("key") in RUNTIME_REASONS
              and not entry.get("reason") else entry for entry in layers]  # the runtime's rows: not operators
    about = None
    if numerics is not None:
        about = {k: numerics.get(k) for k in ("vs", "unit", "inputs", "source", "evaluated_on")} | {
            "file": row.fidelity.layers.file if row.fidelity is not None and row.fidelity.layers is not None else None}
    elif row.checkpoint == "INPUT_MODEL":
        about = {"vs": None, "unit": "dB", "reference": True,
                 "evaluated_on": "INPUT_MODEL is the reference every other checkpoint's per-layer SNR is measured "
                                 "against"}
    return LayersRecord(exp.name, row.checkpoint, str(result.device if result else None),
                        str(result.method if result else None),
                        str(doc.get("result_kind", result.result_kind if result else None)), dict(doc.get("cost") or {}),
                        doc.get("coverage"), tuple(layers), len(doc.get("layers") or []),
                        doc["_file"], tuple(doc.get("warnings") or ()) + tuple(w for w in (unreadable, unread) if w),
                        about, cpu_summary(graph, doc), sensitivity)


def _snr_by_key(numerics: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {str(r.get("key")): r for r in (numerics or {}).get("layers") or []}


def _snr_fields(row: dict[str, Any] | None) -> dict[str, Any]:
    """A layer's per-layer SNR against INPUT_MODEL (None with the reason when it has none)."""
    if row is None:
        return {"snr_db": None, "snr_identical": None, "snr_note": "no per-layer output of this key in the "
                "exported program (a layer the compiler added, or one that only moves data)"}
    return {"snr_db": row.get("snr_db"), "snr_identical": bool(row.get("identical")),
            **({"snr_zeroed": True} if row.get("zeroed") else {}),  # its activations quantize to all zeros
            **({"snr_weak_position": row["weak_position"]} if row.get("weak_position") else {}),
            **({"snr_note": row["note"]} if row.get("note") else {})}


def _graph_path(exp: Experiment, row: PipelineRow) -> Path | None:
    folder = row.profile.compile.folder if row.profile is not None else None
    path = exp.root / folder / GRAPH_FILE if folder else None
    device = (row.lowering or NO_COMPILE).device
    if (path is None or not path.is_file()) and device:  # the compile np run made for the experiment's device
        path = next((p / "artifacts" / f"compiled_{device}" / GRAPH_FILE for p in sorted(exp.root.iterdir())
                     if p.is_dir() and p.name.endswith("_" + row.checkpoint.lower())), None)
    return path


def left_summary(exp: Experiment, row: PipelineRow) -> str | None:
    """cpu_summary of a checkpoint: how many ops left the accelerator, the costliest with its reason, and what to do
    (layers/reasons.py); None when none left it or its compile recorded no reasons."""
    try:
        doc: dict[str, Any] | None = _document(exp, row)
    except NpError:
        doc = None  # no per-layer costs: the summary gives the MAC share instead
    return cpu_summary(read_graph(_graph_path(exp, row)), doc)


def _placement(exp: Experiment, row: PipelineRow) -> dict[str, str]:
    """Per layer key: delegated, CPU, or partly CPU, from the compile's layers_graph.json."""
    path = _graph_path(exp, row)
    if path is None or not path.is_file():
        return {}
    try:
        ops = json.loads(path.read_text(encoding="utf-8")).get("ops") or []
    except (OSError, ValueError, AttributeError):
        return {}
    seen: dict[str, set[bool]] = {}
    for op in ops:
        if any(b in str(op.get("op")) for b in BOUNDARY_OPS) and not op.get("delegated"):
            continue
        seen.setdefault(str(op.get("key")), set()).add(bool(op.get("delegated")))
    return {k: "delegated" if v == {True} else "CPU" if v == {False} else "partly CPU" for k, v in seen.items()}


def _totals(row: PipelineRow) -> dict[str, dict[str, Any]]:
    extras: dict[str, Any] = dict(row.profile.extras) if row.profile is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for metric_type in ("LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "MACS", "SNR", "PTE_SIZE"):
        metric = row.metrics.get(metric_type)
        if metric is None or (metric.value is None and not metric.identical):
            continue
        spread = None
        if metric_type == "LATENCY" and metric.result_kind == "measured":
            spread = (extras.get("latency_ms") or {}).get("iqr")
        out[metric_type] = {"value": metric.value, "unit": metric.unit,
                            "coverage": metric.coverage, "spread": spread,
                            "result_kind": metric.result_kind, "identical": metric.identical}
    delegated, total = row.value("DELEGATED_OPS"), row.value("TOTAL_OPS")
    if total:
        out["DELEGATED_SHARE"] = {"value": round(100.0 * float(delegated or 0) / float(total), 2), "unit": "%"}
    return out


def _targets(exp: Experiment, checkpoints: list[str], others: list[Experiment]) -> list[tuple[Experiment,
                                                                                            PipelineRow]]:
    out: list[tuple[Experiment, PipelineRow]] = []
    rows = _rows(exp)
    if checkpoints:  # named checkpoints join even unprofiled: their compile still says where each layer runs
        out += [(exp, _named(rows, c, exp)) for c in checkpoints]
    else:
        out += [(exp, r) for r in rows if r.profile and r.profile.status == RoundStatus.SUCCESS]
    for other in others:
        other_rows = _rows(other)
        out += [(other, _named(other_rows, c, other)) for c in checkpoints] if checkpoints else \
            [(other, r) for r in other_rows if r.profile and r.profile.status == RoundStatus.SUCCESS]
    return out


def compare_record(exp: Experiment, checkpoints: list[str], others: list[Experiment]) -> CompareRecord:
    """Totals of every chosen checkpoint with deltas against the first, then the layer diff of each against it."""
    targets = _targets(exp, checkpoints, others)
    if len(targets) < 2:
        raise UsageError(f"np compare needs two profiled checkpoints; {exp.name} has {len(targets)}.",
                         hint="Profile another (np profile CHECKPOINT), name them (np compare INPUT_MODEL "
                         "GRAPH_QUANTIZE), or add another experiment's with --with NAME.", code="NP-RPT-400")
    columns: list[dict[str, Any]] = []
    warnings: list[str] = []
    no_costs: dict[str, list[str]] = {}  # reason -> labels: one warning per reason, not one per checkpoint
    for owner, row in targets:
        label = row.checkpoint if owner == exp else f"{owner.name}/{row.checkpoint}"
        try:
            document: dict[str, Any] | None = _document(owner, row)
        except NotFoundError:
            document = None
            no_costs.setdefault(_no_costs_reason(row), []).append(label)
        numerics, unreadable = read_numerics(owner.root, row.fidelity)
        if unreadable:
            warnings.append(f"{owner.name}/{row.checkpoint}: {unreadable}")
        reference = row.checkpoint == "INPUT_MODEL"
        columns.append({"label": label, "experiment": owner.name, "checkpoint": row.checkpoint,
                        "device": (row.profile.device if row.profile else None) or (row.lowering or NO_COMPILE).device,
                        "method": row.profile.method if row.profile else None,
                        "result_kind": row.profile.result_kind if row.profile else None, "totals": _totals(row),
                        "layers": document, "placement": _placement(owner, row),
                        "snr": {} if reference else (_snr_by_key(numerics) if numerics else None),
                        "snr_reference": reference,
                        "module_map": dict((numerics or {}).get("module_map_from_input") or {})})
    warnings += [f"No per-layer costs for {', '.join(labels)}: {reason}; the layer diff shows SNR and placement "
                 "only." for reason, labels in no_costs.items()]
    diffs = [{"base": columns[0]["label"], "other": c["label"], **layer_diff(columns[0], c)} for c in columns[1:]]
    if len({c["device"] for c in columns}) > 1:
        warnings.append("The checkpoints were profiled on different devices: their totals are not comparable as "
                        "a change of the model.")
    for c in columns:
        totals: dict[str, dict[str, Any]] = c["totals"]
        partial = [metric for metric, total in totals.items() if total.get("coverage")]
        if partial:
            text = next(t["coverage"] for t in totals.values() if t.get("coverage"))
            warnings.append(f"{c['label']}: {', '.join(partial)} are {text}.")
    slim = tuple({k: v for k, v in c.items() if k not in ("layers", "snr")}
                 | {"has_layers": c["layers"] is not None, "has_layer_snr": c["snr"] is not None} for c in columns)
    return CompareRecord(slim, tuple(compare_totals(columns)), tuple(diffs), tuple(warnings))
