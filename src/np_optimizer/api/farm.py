"""The board farm as `np devices ls` shows it: each farm device of devices.yaml with the places that can run it and
their state, read from the labgrid coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from np_optimizer.records import FarmDevice, FarmPlace, FarmView
from np_optimizer.records.commands import DeviceListing

__all__ = ["FarmPlace", "FarmDevice", "FarmView", "devices_farm", "devices_ls"]


def _place(raw: dict[str, Any]) -> FarmPlace:
    services = raw.get("services") or []
    service = services[0] if services else {}
    board = None
    if service:
        user = f"{service.get('username')}@" if service.get("username") else ""
        board = f"{user}{service.get('address')}:{service.get('port')}"
    state = "acquired" if raw.get("acquired") else "reserved" if raw.get("reservation") else "free"
    return FarmPlace(name=str(raw["name"]), state=state, acquired_by=raw.get("acquired"), tags=dict(raw["tags"]),
                     board=board, exporter=service.get("exporter"), available=bool(service.get("available")))


def devices_farm(*, cwd: Path | None = None) -> FarmView | None:
    """The farm of the workspace around `cwd` with its places' state, or None when it has no farm. A coordinator
    that cannot be reached raises DeviceUnreachableError (NP-FRM-503, exit 4)."""
    from np_optimizer.profiler.measure.farm import farm_places
    from np_optimizer.workspace.layout import find_workspace
    from np_optimizer.workspace.remote import load_farm, load_remote_devices

    workspace = find_workspace(cwd or Path.cwd())
    coordinator = load_farm(workspace.devices_file) if workspace else None
    if workspace is None or coordinator is None:
        return None
    remotes = load_remote_devices(workspace.devices_file)
    snapshot = farm_places(coordinator)
    places = [_place(p) for p in snapshot.get("places", [])]
    waiting = [r for r in snapshot.get("reservations", []) if r.get("state") == "waiting"]
    devices = []
    for name, remote in sorted(remotes.items()):
        if remote.farm is None:
            continue
        wanted = remote.farm.tag_dict
        mine = tuple(p for p in places if all(p.tags.get(k) == v for k, v in wanted.items()))
        queued = sum(1 for r in waiting if ((r.get("filters") or {}).get("main") or {}) == wanted)
        devices.append(FarmDevice(device=name, tags=wanted, places=mine, waiting=queued))
    return FarmView(coordinator=coordinator, devices=tuple(devices),
                    exporters=tuple(str(e) for e in snapshot.get("exporters", [])))


def devices_ls(*, filters: dict[str, str] | None = None, sort: str | None = None,
               cwd: Path | None = None) -> DeviceListing:
    """np devices ls: the catalogue filtered and sorted (devices_list), and the farm of the workspace around `cwd`."""
    from np_optimizer.api.projects import devices_list

    devices = devices_list(filters=filters, sort=sort)
    return DeviceListing(tuple(d.record() for d in devices), devices_farm(cwd=cwd))
