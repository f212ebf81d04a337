"""Per-layer numerics: each layer's output in a checkpoint against the same layer of INPUT_MODEL, as SNR (dB), so a
user sees which layers lose the SNR. Needs torch.

How: one run of each exported program through a `torch.fx.Interpreter` that keeps the output of every layer (the
last compute op of each layer key, keys.py) on the evaluation inputs; both programs run end to end on their own, so a
layer's SNR includes the error of every layer before it (the error the model's output sees there). Layers are
matched by key; a key that a step fused away (a BN folded into its conv) is matched through lineage.py's map, so the
conv of a quantized checkpoint is compared with INPUT_MODEL's BN output, not with its conv's. Why not ExecuTorch's
Inspector (`calculate_numeric_gap`): it needs an ETDump of a runtime built with the event tracer (the pip runtime has
none) and runs the lowered .pte, whose fused delegates hide the layers inside them; the exported programs keep every
layer and run here for every backend.

    layer_graph(gm)                 the layers of a graph module (lineage.LayerGraph)
    tap(program, samples)           outputs and per-layer values on the samples (one Interpreter pass each)
    layer_snr(reference, test, map) per-layer SNR of `test` against `reference`
    write_numerics(...)             the job's layers_snr.json, and the summary job.json keeps
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.files import write_json
from np_optimizer.layers.keys import assign_keys
from np_optimizer.layers.lineage import INPUT, LayerGraph
from np_optimizer.records import to_dict

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import GraphModule

__all__ = ["NUMERICS_FILE", "NUMERICS_SCHEMA", "Taps", "layer_graph", "tap", "layer_snr", "zeroed_summary",
           "weak_position_summary", "numerics_warnings", "write_numerics"]

NUMERICS_FILE = "layers_snr.json"
NUMERICS_SCHEMA = 1
_DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor"  # op_name() of it (the float scale picks .default)


def layer_graph(gm: GraphModule) -> LayerGraph:
    """Keys of every call_function node (keys.py's rules), each layer's output node, producers and liveness."""
    import torch

    from np_optimizer.graph.delegation import op_name

    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    keys = assign_keys(((n.name, op_name(n), n.meta.get("nn_module_stack"),
                         [a.name for a in n.all_input_nodes if a.op == "call_function"], n.meta.get("torch_fn"))
                        for n in nodes))
    graph = LayerGraph()
    label_of = {name: key.label for name, key in keys.items()}
    for index, node in enumerate(nodes):
        key = keys[node.name]
        label = key.label
        if label not in graph.info:
            graph.labels.append(label)
            graph.info[label] = to_dict(key)
            graph.producers[label] = set()
        for source in node.all_input_nodes:
            if source.op == "placeholder":
                graph.producers[label].add(INPUT)
            elif source.name in label_of and label_of[source.name] != label:
                graph.producers[label].add(label_of[source.name])
        if op_name(node) == _DEQUANTIZE and len(node.args) > 1 and isinstance(node.args[1], float):
            graph.int8_step[label] = node.args[1]  # the quantization step of the layer's (last) quantized output
        value = node.meta.get("val")
        # the layer's output as the next layer reads it: its last float result, after the (de)quantize and reshape
        # attributed to it, so a layer's output quantization counts against that layer (a pad module is a layer too)
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            graph.outputs[label], graph.position[label] = node.name, index
    live: set[str] = set()
    stack = list(gm.graph.output_node().all_input_nodes)
    while stack:  # every node with a path to the outputs
        node = stack.pop()
        if node.name not in live:
            live.add(node.name)
            stack.extend(node.all_input_nodes)
    graph.live = {label_of[name] for name in live if name in label_of}
    return graph


@dataclass
class Taps:
    """One program run on the samples: its outputs, and each layer's output per sample."""

    graph: LayerGraph
    outputs: list[Any]
    values: dict[str, list[torch.Tensor]]
    error: str | None = None  # why no layer was kept (the outputs are still the program's)


def tap(program: ExportedProgram, samples: Sequence[tuple[Any, ...]]) -> Taps:
    """Run `program` on each sample once, keeping the model's outputs and every layer's output. Per-layer numerics
    never fail a job: a graph the Interpreter cannot run (or key) gives the plain outputs and the reason."""
    import torch

    try:
        return _tap(program, samples)
    except Exception as exc:  # the plain run below raises again if the program itself is broken
        with torch.no_grad():
            module = program.module()
            outputs = [module(*x) for x in samples]
        return Taps(LayerGraph(), outputs, {}, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


_RANDOM = ("rand", "bernoulli", "normal", "uniform", "dropout", "multinomial", "poisson")


def _constant_nodes(gm: GraphModule) -> set[str]:
    """Nodes whose value is the same for every input: attributes, and functional ops of attributes only (a quantized
    weight's dequantize, a folded scale). A program that mutates state, or a random op, is never cached."""
    constant: set[str] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant.add(node.name)
        elif node.op == "call_function":
            schema = getattr(node.target, "_schema", None)
            if schema is not None and schema.is_mutable:
                return set()
            name = str(node.target).lower()
            if all(a.name in constant for a in node.all_input_nodes) and not any(r in name for r in _RANDOM):
                constant.add(node.name)
    return constant


def _tap(program: ExportedProgram, samples: Sequence[tuple[Any, ...]]) -> Taps:
    import torch

    gm = program.module()
    graph = layer_graph(gm)
    wanted = {name: label for label, name in graph.outputs.items()}
    # computed for the first sample and reused: the same op on the same tensors gives the same values, and a quantized
    # program's reference kernels otherwise dequantize every weight again for every sample
    constant = _constant_nodes(gm)
    computed: dict[str, Any] = {}

    class _Tap(torch.fx.Interpreter):
        def __init__(self) -> None:
            super().__init__(gm)
            self.kept: dict[str, torch.Tensor] = {}

        def run_node(self, n: torch.fx.Node) -> Any:
            if n.name in computed:
                result = computed[n.name]
            else:
                result = super().run_node(n)
                if n.name in constant:
                    computed[n.name] = result
            if n.name in wanted and isinstance(result, torch.Tensor):
                self.kept[wanted[n.name]] = result.detach()
            return result

    outputs: list[Any] = []
    values: dict[str, list[torch.Tensor]] = {}
    with torch.no_grad():
        for sample in samples:
            interpreter = _Tap()
            outputs.append(interpreter.run(*sample))
            for label, value in interpreter.kept.items():
                values.setdefault(label, []).append(value)
    return Taps(graph, outputs, values)


def _snr(reference: list[torch.Tensor], test: list[torch.Tensor]) -> tuple[float | None, bool]:
    """(SNR in dB over every sample together, identical); None when the reference carries no signal."""
    import torch

    signal = noise = 0.0
    for r, t in zip(reference, test):
        # dot products in the tensors' own dtype (BLAS, no float64 copies: those cost seconds per job on a ResNet);
        # each sample's sums are added in Python floats (float64)
        kind = r.dtype if r.dtype in (torch.float32, torch.float64) else torch.float32  # half: no CPU dot
        a, b = r.detach().reshape(-1).to(kind), t.detach().reshape(-1).to(kind)
        diff = a - b
        signal += float(torch.dot(a, a))
        noise += float(torch.dot(diff, diff))
    if noise == 0.0:
        return None, True
    if signal == 0.0 or not math.isfinite(noise):
        return None, False
    return round(10.0 * math.log10(signal / noise), 3), False


def layer_snr(reference: Taps, test: Taps, key_map: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """One row per layer of `test` with an output: its SNR against the matching layer of `reference`. The matching
    layer is the layer of the same key, or, when the step fused keys into it, the last of them (the fused layer's
    output is theirs)."""
    fused: dict[str, list[str]] = {}
    for old, new in key_map.items():
        if new is not None:
            fused.setdefault(new, []).append(old)
    rows = []
    for label in test.graph.labels:
        if label not in test.graph.outputs:
            continue  # no float result (an integer index computation)
        row: dict[str, Any] = {**test.graph.info[label], "node": test.graph.outputs[label]}
        candidates = [c for c in [label if key_map.get(label, label) == label else None, *fused.get(label, [])]
                      if c is not None and c in reference.graph.outputs]
        if not candidates:
            rows.append({**row, "snr_db": None, "identical": False,
                         "note": "no layer of the reference has this key"})
            continue
        source = max(candidates, key=lambda c: reference.graph.position[c])
        row.update(reference_key=source, reference_node=reference.graph.outputs[source])
        if source != label:
            row["fused"] = sorted(c for c in candidates if c != label)
        ref_values, test_values = reference.values.get(source, []), test.values.get(label, [])
        if len(ref_values) != len(test_values) or any(r.shape != t.shape for r, t in zip(ref_values, test_values)):
            rows.append({**row, "snr_db": None, "identical": False,
                         "note": "the layer's output has another shape than the reference's"})
            continue
        snr, identical = _snr(ref_values, test_values)
        row.update(snr_db=snr, identical=identical)
        if snr is None and not identical:
            row["note"] = "the reference output is all zeros"
        weak = _weak_position(ref_values, test_values, snr)
        if weak is not None:
            row["weak_position"] = weak
        step = test.graph.int8_step.get(label)
        peak = 0.0 if step is None else max((float(r.detach().abs().max()) for r in ref_values if r.numel()),
                                            default=0.0)  # only where the layer's output is quantized
        if step is not None and 0.0 < peak < step / 2:
            # every value rounds to int8 zero: the SNR of this layer says nothing but "zeroed"
            row.update(zeroed=True, reference_peak=peak, int8_step=step,
                       note=f"INPUT_MODEL's output here peaks at {peak:.2g}, below half the int8 step ({step:.2g}): "
                            "it quantizes to zero")
        rows.append(row)
    return rows


_WEAK_MARGIN_DB = 10.0  # a position this far below the whole output's SNR is named
_WEAK_BELOW_DB = 40.0  # and only when it loses something that matters (not float rounding of a GO pass)


def _weak_position(reference: list[torch.Tensor], test: list[torch.Tensor], whole: float | None) -> dict[str, Any] | None:
    """For a sequence output (batch, positions, features): the position whose SNR is lowest, when it is at least
    10 dB below the whole output's and under 40 dB. A position with much smaller values than the others (a ViT's CLS token) loses
    more to a per-tensor int8 scale set by the others, and the whole-tensor SNR hides it."""
    import torch

    if whole is None or not reference or reference[0].dim() != 3 or reference[0].shape[1] < 2:
        return None
    signal = noise = None
    for r, t in zip(reference, test):
        a, b = r.detach().float(), t.detach().float()
        s, n = (a * a).sum(dim=(0, 2)), ((a - b) ** 2).sum(dim=(0, 2))
        signal, noise = (s, n) if signal is None or noise is None else (signal + s, noise + n)
    assert signal is not None and noise is not None
    valid = (signal > 0) & (noise > 0)
    if not bool(valid.any()):
        return None
    db = torch.full_like(signal, math.inf)
    db[valid] = 10.0 * torch.log10(signal[valid] / noise[valid])
    index = int(torch.argmin(db))
    value = float(db[index])
    if not math.isfinite(value) or value > whole - _WEAK_MARGIN_DB or value >= _WEAK_BELOW_DB:
        return None
    return {"index": index, "snr_db": round(value, 3), "positions": int(signal.shape[0])}


def weak_position_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The first layer (graph order) with a weak position, where the loss starts; None when there is none."""
    first = next((r for r in rows if r.get("weak_position")), None)
    if first is None:
        return None
    return {"first": first["key"], "layer_snr_db": first["snr_db"], **first["weak_position"],
            "layers": sum(1 for r in rows if r.get("weak_position"))}


def zeroed_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Layers whose activations quantize to all zeros (INPUT_MODEL's values below half the int8 step), first one
    in graph order; None when there are none."""
    zeroed = [r for r in rows if r.get("zeroed")]
    if not zeroed:
        return None
    first = zeroed[0]
    return {"layers": len(zeroed), "first": first["key"], "reference_peak": first["reference_peak"],
            "int8_step": first["int8_step"]}


def write_numerics(folder: Path, *, checkpoint: str, rows: list[dict[str, Any]], key_map: Mapping[str, str | None],
                   inputs: int, source: str, seconds: float, relative_to: Path) -> dict[str, Any]:
    """Write the job's layers_snr.json; return the small summary job.json (and report.json) keep."""
    path = folder / NUMERICS_FILE
    write_json(path, {
        "schema_version": NUMERICS_SCHEMA, "checkpoint": checkpoint, "vs": "INPUT_MODEL", "inputs": inputs,
        "source": source, "unit": "dB",
        "evaluated_on": "exported programs (PyTorch reference kernels); each layer's output against the same layer "
                        "of INPUT_MODEL, both run end to end, so a layer's SNR includes the error of the layers "
                        "before it",
        "module_map_from_input": dict(key_map), "seconds": round(seconds, 3), "layers": rows})
    ranked = sorted((r for r in rows if r.get("snr_db") is not None), key=lambda r: float(r["snr_db"]))
    zeroed, weak = zeroed_summary(rows), weak_position_summary(rows)
    return {"file": str(path.relative_to(relative_to)), "layers": len(rows),
            "lowest": [{"key": r["key"], "snr_db": r["snr_db"]} for r in ranked[:3]], "seconds": round(seconds, 3),
            **({"zeroed": zeroed} if zeroed else {}), **({"weak_position": weak} if weak else {})}


def numerics_warnings(summary: Mapping[str, Any]) -> list[str]:
    """What the job warns of, from write_numerics' summary: activations quantized to zeros, and a weak position."""
    out = []
    zeroed, weak = summary.get("zeroed"), summary.get("weak_position")
    if zeroed:
        out.append(f"Quantization turns the activations of {zeroed['layers']} layer(s) into zeros, from "
                   f"{zeroed['first']} on: INPUT_MODEL's values there peak at {zeroed['reference_peak']:.2g}, below "
                   f"half the int8 step ({zeroed['int8_step']:.2g}), so the SNR collapses there. Activations this "
                   "small are typical of untrained (randomly initialised) weights; with real weights check "
                   "np report --layers (SNR column).")
    if weak:
        out.append(f"Position {weak['index']} of {weak['positions']} in {weak['first']}'s output keeps "
                   f"{weak['snr_db']:.1f} dB while the whole output keeps {weak['layer_snr_db']:.1f} dB "
                   f"({weak['layers']} layer(s) like this): its values are much smaller than the other positions', "
                   "and a per-tensor int8 scale is set by the others. A model that reads that position alone (a "
                   "ViT's classifier reads the CLS token, position 0) gets the lower figure.")
    return out
