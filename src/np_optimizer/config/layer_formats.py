"""graph_quantize's `layers:` in run.yaml: module-path patterns mapped to a format, checked like every run.yaml rule.

    layers:
      "features.0": W8-A16     # R035 unknown format, R036 a format the device lacks
      "classifier": float
      "<input>": W8-A16        # the model's inputs (and "<output>" its output): R045 where the backend cannot

Without the model: the mapping's shape, each format, and the reserved names `<input>` and `<output>` (parse_layers:
a misspelt one, float for one, or either on a backend whose quantizer gives the model's inputs no format of their
own, is R045). With the model's graph (np validate loads it;
graph_quantize checks its own input program again before quantizing): a pattern that matches no module (R037, a
warning naming the nearest module paths) and a format the device's compiler refuses for a layer a pattern names
(R038, an error: int16 matmuls on Ethos-U55). No torch here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import all_scheme_names
from np_optimizer.backends.base import FLOAT
from np_optimizer.config.issues import L_DEVICE, L_REFERENCE, L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.parsing import issue, match
from np_optimizer.quantize.layer_formats import IO_PATHS, LayerFormats, NodeKey, nearest_paths

if TYPE_CHECKING:
    from np_optimizer.devices import Device

__all__ = ["parse_layers", "parse_sensitivity", "layer_issues", "step_formats", "GRAPH_KEY", "SENSITIVITY_AUTO"]

SENSITIVITY_AUTO = "*"  # `sensitivity: true`: the backend's candidates, resolved when the step runs
GRAPH_KEY = "graph"  # the model entry's node keys (NodeKey list), when the caller has the model's graph


def device_formats(device: Device) -> tuple[str, ...]:
    return (*device.backend_spec.scheme_names, FLOAT)


def parse_layers(raw: Any, loc: str, device: Device | None,
                 issues: list[ValidationIssue]) -> tuple[tuple[str, str], ...]:
    """The (pattern, format) pairs in file order, formats spelled as the backend spells them; bad entries reported
    and left out."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not all(isinstance(k, str) and k.strip() for k in raw):
        issues.append(issue("R034", L_SCHEMA, loc, f"layers maps module paths (or patterns) to a format, got {raw!r}.",
                            'Example: `layers: {"features.0": W8-A16, "classifier": float}` (np report --layers '
                            "names the module paths)."))
        return ()
    known = (*all_scheme_names(), FLOAT)
    out = []
    for pattern, value in raw.items():
        where = f"{loc}.{pattern}"
        fmt = match(value, known)
        if pattern.strip().startswith("<") and _io_issue(pattern.strip(), fmt, where, device, issues):
            continue
        if fmt is None:
            issues.append(issue("R035", L_SCHEMA, where, f"layers: {pattern!r} asks for format {value!r}, which no "
                                "backend has.", did_you_mean(str(value), device_formats(device) if device else known)))
            continue
        if device is not None and fmt not in device_formats(device):
            issues.append(issue("R036", L_DEVICE, where, f"layers: {pattern!r} asks for {fmt}, which the "
                                f"{device.backend} backend of '{device.name}' does not have.",
                                f"Formats for {device.backend}: {', '.join(device_formats(device))}."))
            continue
        out.append((pattern.strip(), fmt))
    return tuple(out)


def _io_issue(name: str, fmt: str | None, where: str, device: Device | None,
              issues: list[ValidationIssue]) -> bool:
    """R045 for a reserved name the step cannot honour: misspelt, float, or on a backend without io formats."""
    said = ""
    if name not in IO_PATHS:
        said, hint = f"layers: {name!r} is no module path and no reserved name.", did_you_mean(name, IO_PATHS)
    elif fmt == FLOAT:
        said = (f"layers: {name!r} cannot be float: the layer that reads the model's input (or writes its output) "
                "quantizes it in its own format all the same.")
        hint = "Give that layer float instead, or give the input a quantized format (W8-A8, W8-A16)."
    elif device is not None and not device.backend_spec.io_formats:
        said = (f"layers: {name!r} asks a format for the model's {name.strip('<>')}, which the {device.backend} "
                "backend cannot give: its quantizer quantizes it in the format of the layer that reads (or writes) it.")
        hint = "Give that layer the format instead (np report --layers names it)."
    if said:
        issues.append(issue("R045", L_DEVICE if name in IO_PATHS and fmt != FLOAT else L_SCHEMA, where, said, hint))
    return bool(said)


def parse_sensitivity(raw: Any, loc: str, device: Device | None, issues: list[ValidationIssue]) -> tuple[str, ...]:
    """graph_quantize's `sensitivity:` (pipeline/sensitivity.py): null/false (off), true (the backend's candidate
    formats), or a list of two or more formats, the base first."""
    if raw is None or raw is False:
        return ()
    if raw is True:
        return (SENSITIVITY_AUTO,)
    known = device_formats(device) if device is not None else (*all_scheme_names(), FLOAT)
    picked = [match(v, known) for v in raw] if isinstance(raw, list) else []
    if len(picked) < 2 or None in picked or len(set(picked)) < len(picked):
        issues.append(issue("R039", L_SCHEMA if not isinstance(raw, list) else L_DEVICE, loc,
                            f"sensitivity takes true or a list of two or more distinct formats, the base first; got "
                            f"{raw!r}.", f"Example: `sensitivity: [W8-A8, W8-A16]`. Formats here: {', '.join(known)}."))
        return ()
    return tuple(str(p) for p in picked)


def layer_issues(scheme: str, layers: tuple[tuple[str, str], ...], keys: Iterable[NodeKey], device: Device,
                 loc: str) -> list[ValidationIssue]:
    """What the model's graph says of the patterns: those matching no module, those forcing a refused format."""
    keys = list(keys)
    backend = device.backend_spec
    formats = LayerFormats(scheme, layers, limit=backend.format_limit, target=device.mlia_target)
    paths = [p for k in keys for p in k.paths]
    issues = []
    for pattern in formats.unmatched(keys):
        near = ", ".join(nearest_paths(pattern, paths)) or "(the model has no submodules)"
        issues.append(issue("R037", L_REFERENCE, f"{loc}.{pattern}", f"layers: {pattern!r} matches no module of the "
                            "model, so it changes nothing.", f"Nearest module paths: {near} (np report --layers "
                            "lists them all; `*` and `?` are wildcards).", warning=True))
    refused: dict[str, tuple[str, list[str]]] = {}
    for key in keys:
        found = formats.refused(key)
        if found is not None:
            refused.setdefault(found[0], (found[1], []))[1].append(key.paths[-1] or key.name)
    for pattern, (reason, modules) in refused.items():
        fmt = dict(layers)[pattern]
        where = ", ".join(dict.fromkeys(modules))
        issues.append(issue("R038", L_DEVICE, f"{loc}.{pattern}", f"layers: {pattern!r} gives {fmt} to {where}, "
                            f"which '{device.name}' refuses in {fmt}: {reason.rsplit(': ', 1)[0]}.",
                            "Narrow the pattern, or add a later pattern giving those modules W8-A8; with `scheme: "
                            f"{fmt}` np gives such layers their supported format itself and records why."))
    return issues


def step_formats(scheme: str, layers: tuple[tuple[str, str], ...], keys: Iterable[NodeKey], device: Device
                 ) -> tuple[LayerFormats | None, list[ValidationIssue], list[tuple[str, str]]]:
    """For graph_quantize on its input program: the formats (None when every node takes the scheme, as without
    `layers:`), the issues of the patterns, and (module, why) of each node the backend's limit moved."""
    keys = list(keys)
    formats = LayerFormats(scheme, layers, limit=device.backend_spec.format_limit, target=device.mlia_target)
    if not layers and formats.is_uniform(keys):
        return None, [], []
    moved = [(k.paths[-1] or k.name, choice.why) for k in keys if (choice := formats.choice(k)).limited]
    return formats, layer_issues(scheme, layers, keys, device, "graph_quantize.layers"), moved
