"""np devices ls."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import JsonOpt, PlainOpt
from np_optimizer.cli.render import print_json, print_plain, print_table
from np_optimizer.devices import Device
from np_optimizer.errors import UsageError

app = typer.Typer(help="The device catalogue and what each profiling method gives on it.", no_args_is_help=True)


def _methods(device: Device) -> str:
    parts = []
    for m in device.methods:
        need = " (SSH)" if m.requires else ""
        parts.append(f"{m.method}{need}: {', '.join(str(x) for x in m.metrics)}")
    return "; ".join(parts)


@app.command("ls", epilog="Example: np devices ls --filter backend=ethos-u")
def ls(
    filter_: Annotated[Optional[list[str]], typer.Option("--filter", "-f", help="key=value (device, runtime, backend, "
                                                          "method, mlia_target); repeatable.")] = None,
    sort: Annotated[Optional[str], typer.Option("--sort", "-s", help="field[:asc|desc].")] = None,
    json_mode: JsonOpt = False,
    plain: PlainOpt = False,
) -> None:
    """List supported device combinations, with the metrics each method gives."""
    filters = {}
    for item in filter_ or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"Invalid --filter '{item}'.", hint="Use key=value, e.g. --filter backend=xnnpack.",
                             code="NP-DEV-410")
        filters[key.strip()] = value.strip()
    devices = api.devices_list(filters=filters, sort=sort)
    if json_mode:
        print_json([d.to_dict() for d in devices])
        return
    rows = [[d.name, d.runtime, d.backend, d.mlia_target or "-", _methods(d)] for d in devices]
    if plain:
        print_plain(["device", "runtime", "backend", "mlia_target", "methods"], rows)
    else:
        print_table(f"Supported Device Combinations ({len(devices)})",
                    ["Device", "Runtime", "Backend", "MLIA target", "Methods: metrics"], rows)
