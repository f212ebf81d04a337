"""Render docs/compatibility.md from the device catalogue
(`python -m np_optimizer.docgen.compatibility > docs/compatibility.md`).

A test regenerates it and fails when the committed file differs, so the docs never drift from the table.
"""

from __future__ import annotations

from np_optimizer.backends import backends
from np_optimizer.devices import DEVICES, default_method
from np_optimizer.metrics import HEADLINE as HEADLINE_METRICS

__all__ = ["render_compatibility"]


def render_compatibility() -> str:
    lines = [
        "# Compatibility matrix",
        "",
        "Generated from `src/np_optimizer/devices/catalog.py` and `src/np_optimizer/backends/` by `make docs`; do not edit by hand.",
        "",
        "## Devices",
        "",
        "| Device | Name | Runtime | Backend | Chipset | MLIA target | Default method |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in DEVICES:
        plain, with_ssh = default_method(d), default_method(d, remote_configured=True)
        default = plain if plain == with_ssh else f"{plain} ({with_ssh} when devices.yaml gives SSH)"
        lines.append(f"| `{d.name}` | {d.display_name} | {d.runtime} | {d.backend} | {d.chipset} | "
                     f"{d.mlia_target or '-'} | {default} |")
    metric_names = [str(m) for m in HEADLINE_METRICS]
    lines += ["", "## Metrics by device and method", "",
              "✓ given, — not given by that combination (the report omits it and warns why).", "",
              "| Device | Method | Kind | " + " | ".join(metric_names) + " | Needs |",
              "|---|---|---|" + "---|" * len(metric_names) + "---|"]
    for d in DEVICES:
        for m in d.methods:
            marks = " | ".join("✓" if x in m.metrics else "—" for x in HEADLINE_METRICS)
            lines.append(f"| `{d.name}` | {m.method} | {m.result_kind} | {marks} | {m.requires or '-'} |")
    lines += ["", "## Notes by method", ""]
    seen = set()
    for d in DEVICES:
        for m in d.methods:
            if m.note and m.note not in seen:
                seen.add(m.note)
                lines.append(f"- **{m.method}** ({d.backend}): {m.note}")
    lines += ["", "## Backends", "", "Generated from the registered backends (`src/np_optimizer/backends/`).", "",
              "| Backend | Name | Runs on this machine | MLIA estimates | advanced_quantize | Versions that decide the "
              "compiled bytes |", "|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for b in backends():
        lines.append(f"| `{b.name}` | {b.display_name} | {yes[b.runs_on_host]} | {yes[b.mlia_estimable]} | "
                     f"{yes[b.advanced_quantize]} | {', '.join(b.tool_versions)} |")
    lines += ["", "## Graph-quantize schemes by backend", ""]
    for b in backends():
        lines += [f"- {b.name}:"] + [f"  - `{s.name}`: {s.description}" for s in b.schemes]
    notes = [f"- `{d.name}`: {d.notes}" for d in DEVICES if d.notes]
    if notes:
        lines += ["", "## Device notes", "", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_compatibility(), end="")
