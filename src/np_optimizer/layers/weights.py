"""Which weights a quantize step left in float, by layer, and whether most of the model's weights stayed float (an
LSTM under XNNPACK's W8-A8, say: the quantizer annotates no LSTM, so the checkpoint shrinks by 1% and nothing in its
SNR says why). Needs torch (runs inside the graph_quantize step)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from np_optimizer.layers.keys import module_of

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["float_weights", "float_weights_warning", "MOSTLY_FLOAT", "float_recurrent", "float_recurrent_warnings"]

MOSTLY_FLOAT = 0.5  # share of weight elements left float above which the step warns


def float_weights(program: ExportedProgram, kept_float: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Weight elements read as float parameters (not through a dequantize) per layer, and their share of all
    weight elements. `kept_float`: modules np was asked to keep float (GREEDY, advanced_quantize), so the reason
    says so; every other float weight is one the backend's quantizer did not annotate."""
    from np_optimizer.graph.stats import _used_constants, _weights_per_element

    total = 0
    layers: dict[str, dict[str, Any]] = {}
    for node, kind, tensor in _used_constants(program):
        per_element = _weights_per_element(node)  # read as a quantized weight (a dequantize, an embedding kernel)
        through_dequant = per_element > 0
        if (kind != "PARAMETER" and not through_dequant) or tensor.dim() < 2:
            continue  # buffers, BN statistics, scales, biases and norm scales (1-D, never quantized): not weights
        count = int(tensor.numel()) * max(per_element, 1)
        total += count
        if through_dequant or not tensor.is_floating_point():
            continue
        owner = next((module_of(u.meta.get("nn_module_stack")) for u in node.users
                      if module_of(u.meta.get("nn_module_stack"))), None) or ("", "model")
        ops = sorted({str(getattr(u.target, "__name__", u.target)).split(".")[0] for u in node.users})
        entry = layers.setdefault(owner[0], {"module": owner[0], "class": owner[1], "elements": 0, "ops": ops})
        entry["elements"] += count
    floating = sum(e["elements"] for e in layers.values())
    for entry in layers.values():
        entry["reason"] = ("kept float as configured" if entry["module"] in kept_float
                           else "the backend's quantizer did not annotate this op")
    ranked = sorted(layers.values(), key=lambda e: -e["elements"])
    return {"weight_elements": total, "float_elements": floating,
            "float_share_pct": round(100.0 * floating / total, 2) if total else 0.0, "float_layers": ranked}


def float_weights_warning(summary: dict[str, Any], scheme: str, backend: str, limit: int = 6,
                          named: frozenset[str] = frozenset()) -> str | None:
    """The warning when most weights stayed float; layers in `named` (a warning of their own says why, as for a
    float recurrent layer) are left out of it, names and share."""
    layers = [e for e in summary["float_layers"] if e["module"] not in named]
    floating = sum(e["elements"] for e in layers)
    if not summary["weight_elements"] or floating / summary["weight_elements"] <= MOSTLY_FLOAT:
        return None
    names = ", ".join(f"{e['module'] or '(model)'} ({e['class']}, {e['elements']:,} weights: {e['reason']})"
                      for e in layers[:limit])
    more = len(layers) - limit
    share = 100.0 * floating / summary["weight_elements"]
    return (f"{share:.1f}% of the weights stayed float after {scheme} on {backend}: "
            f"{names}{f' and {more} more' if more > 0 else ''}. The size and speed gains of quantization do not "
            "apply to them.")


def float_recurrent(program: ExportedProgram, kept_float: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The recurrent layers (LSTM, GRU, RNN) whose weights a quantize step left float: module, class, op, MACs,
    parameters and their share of the model's, and why (kept float as configured, or the quantizer's doing)."""
    from np_optimizer.graph.stats import count_params, recurrent_nodes

    found = [row for row in recurrent_nodes(program) if row["params_float"]]
    if not found:
        return []
    total = count_params(program)
    out = []
    for row in found:
        module, cls = module_of(row["stack"]) or ("", "model")
        qualified = str(list(row["stack"].values())[-1][1]) if row["stack"] else ""
        out.append({"module": module, "class": f"nn.{cls}" if "torch.nn." in qualified else cls, "op": row["op"],
                    "node": row["node"], "macs": row["macs"], "params": row["params"],
                    "params_share_pct": round(100.0 * row["params"] / total, 2) if total else None,
                    "reason": "kept float as configured" if module in kept_float else "not quantized"})
    return out


def float_recurrent_warnings(layers: list[dict[str, Any]], scheme: str, backend: str) -> list[str]:
    """One warning per recurrent layer left float, whatever its share: `lstm (nn.LSTM, 66,560 MACs, 98% of the
    weights) stays float under W8-A8: the XNNPACK quantizer does not quantize recurrent layers, ...`."""
    out = []
    for row in layers:
        share = row["params_share_pct"]
        weights = "" if share is None else f", {share:.0f}% of the weights" if share >= 1 else \
            f", {share:.1f}% of the weights"
        why = ("it was kept float as configured" if row["reason"] != "not quantized"
               else f"the {backend.upper()} quantizer does not quantize recurrent layers")
        out.append(f"{row['module'] or '(model)'} ({row['class']}, {row['macs']:,} MACs{weights}) stays float under "
                   f"{scheme}: {why}, so the size and speed gains of quantization do not apply to it.")
    return out
