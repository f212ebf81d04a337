"""np devices ls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from np_optimizer import api
from np_optimizer.cli.options import JsonOpt, PlainOpt
from np_optimizer.cli.render import print_json, print_plain, print_table
from np_optimizer.errors import UsageError
from np_optimizer.records import DeviceRecord, FarmView, to_dict

if TYPE_CHECKING:
    from np_optimizer.records import FarmView

app = typer.Typer(help="The device catalogue and what each profiling method gives on it.", no_args_is_help=True)


def _methods(device: DeviceRecord) -> str:
    parts = []
    for method, gives in device.methods.items():
        need = " (SSH)" if gives.requires else ""
        parts.append(f"{method}{need}: {', '.join(str(x) for x in gives.metrics)}")
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
    listing = api.devices_ls(filters=filters, sort=sort)
    devices, farm = listing.devices, listing.farm
    by_name = {f.device: f for f in farm.devices} if farm else {}
    if json_mode:  # a farm device's entry gains "farm": its tags, places and their state
        print_json([to_dict(d) | ({"farm": to_dict(by_name[d.device]) | {"coordinator": farm.coordinator}}
                                  if farm and d.device in by_name else {}) for d in devices])
        return
    rows = [[d.device, d.runtime, d.backend, d.mlia_target or "-", _methods(d)] for d in devices]
    if plain:
        print_plain(["device", "runtime", "backend", "mlia_target", "methods"], rows)
    else:
        print_table(f"Supported Device Combinations ({len(devices)})",
                    ["Device", "Runtime", "Backend", "MLIA target", "Methods: metrics"], rows)
    if farm is not None:
        _print_farm(farm, plain)


def _print_farm(farm: FarmView, plain: bool) -> None:
    rows = []
    for device in farm.devices:
        queue = f" ({device.waiting} waiting)" if device.waiting else ""
        for place in device.places or ():
            state = f"acquired by {place.acquired_by}" if place.state == "acquired" else place.state
            rows.append([device.device + queue, place.name, state, place.board or "-",
                         place.exporter or "-" if place.available or not place.board else f"{place.exporter} (down)",
                         ", ".join(f"{k}={v}" for k, v in sorted(place.tags.items()))])
        if not device.places:
            rows.append([device.device + queue, "-", "no place has the tags", "-", "-",
                         ", ".join(f"{k}={v}" for k, v in sorted(device.tags.items()))])
    if plain:
        print_plain(["device", "place", "state", "board", "exporter", "tags"], rows, section="farm")
    else:
        print_table(f"Board farm at {farm.coordinator} (labgrid)",
                    ["Device", "Place", "State", "Board", "Exporter", "Tags"], rows)
