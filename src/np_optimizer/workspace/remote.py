"""The workspace's device settings (devices.yaml): where a remote device is reached, never in run.yaml.

    farm:                                # optional: a labgrid board farm (see profiler/measure/farm.py)
      coordinator: 10.0.0.5:20408
    devices:
      raspberry_pi_5:
        ssh: pi@192.168.1.20        # destination (user@host)
        port: 22
        python: /home/pi/et/bin/python   # a Python with the ExecuTorch runtime
        identity_file: ~/.ssh/id_ed25519
        known_hosts: ~/.ssh/known_hosts   # optional
      jetson_like_board:
        labgrid: {tags: {np-target: rpi5}, priority: 0}   # any free farm place with these tags, instead of ssh:
        python: /home/pi/et/bin/python

A farm device's address, user and port come from its place's NetworkService when the place is acquired.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.errors import ConfigError

if TYPE_CHECKING:
    from np_optimizer.workspace import Experiment

__all__ = ["RemoteDevice", "FarmPlaces", "load_remote_devices", "load_farm", "at_place", "remote_for", "remote_configured"]

_KEYS = ("ssh", "labgrid", "port", "python", "identity_file", "known_hosts", "work_dir", "connect_timeout")
_TAG = re.compile(r"^[a-z][a-z0-9_-]*$")  # labgrid's TAG_KEY; values: TAG_VAL
_TAG_VALUE = re.compile(r"^[a-z0-9_.-]*$")


@dataclass(frozen=True)
class FarmPlaces:
    """Which places of a labgrid farm can run the device: any free one with all these tags."""

    coordinator: str  # host:port of labgrid-coordinator
    tags: tuple[tuple[str, str], ...]
    priority: int = 0

    @property
    def tag_dict(self) -> dict[str, str]:
        return dict(self.tags)


@dataclass(frozen=True)
class RemoteDevice:
    device: str
    destination: str
    port: int = 22
    python: str = "python3"
    identity_file: str | None = None
    known_hosts: str | None = None  # default: ssh's own (~/.ssh/known_hosts)
    work_dir: str = "/tmp/np-measure"
    connect_timeout: int = 10
    farm: FarmPlaces | None = None  # set: the destination and port come from a farm place's NetworkService
    source: str | None = None  # the devices.yaml that sets them (named in the hint of an unreachable device)


def _config_error(devices_file: Path, message: str, hint: str) -> ConfigError:
    return ConfigError(f"{devices_file}: {message}", hint=hint, code="NP-DEV-400")


def _read(devices_file: Path) -> Any:
    # the one YAML reader (UTF-8 only, no tags, bounded aliases and nesting); imported on first use, not at start-up
    from np_optimizer.config.yamlfile import YamlProblem, read_yaml

    try:
        data, _node = read_yaml(devices_file)
    except YamlProblem as problem:
        raise ConfigError(problem.message, hint=f"{problem.hint} The format is in the README (Remote devices).",
                          code="NP-DEV-400") from None
    except OSError as exc:
        raise ConfigError(f"{devices_file} cannot be read: {exc.strerror or exc}.",
                          hint="Check that devices.yaml is a readable file.", code="NP-DEV-400") from None
    return data


def _text(devices_file: Path, name: str, settings: dict[str, Any], key: str, default: str | None) -> str | None:
    value = settings.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _config_error(devices_file, f"{key} of device '{name}' must be text (got {value!r}).",
                            f"Write it as a string, e.g. {key}: {_EXAMPLES[key]}")
    return value


def _integer(devices_file: Path, name: str, settings: dict[str, Any], key: str, default: int, low: int,
             high: int) -> int:
    value: Any = settings.get(key, default)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value) < 10:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _config_error(devices_file, f"{key} of device '{name}' must be a whole number from {low} to {high} "
                            f"(got {value!r}).", f"Example: {key}: {default}")
    return int(value)


_EXAMPLES = {"ssh": "pi@192.168.1.20", "python": "/home/pi/et/bin/python", "identity_file": "~/.ssh/id_ed25519",
             "known_hosts": "~/.ssh/known_hosts", "work_dir": "/tmp/np-measure"}


def _coordinator(devices_file: Path, data: dict[str, Any]) -> str | None:
    farm = data.get("farm")
    if farm is None:
        return None
    if not isinstance(farm, dict) or set(map(str, farm)) - {"coordinator"}:
        raise ConfigError(f"{devices_file}: `farm:` must be a mapping with one setting, coordinator.",
                          hint="Example: farm: {coordinator: 10.0.0.5:20408}", code="NP-DEV-400")
    address = farm.get("coordinator")
    host, sep, port = str(address or "").rpartition(":")
    if not isinstance(address, str) or not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 \
            or any(c.isspace() for c in address):
        raise ConfigError(f"{devices_file}: farm.coordinator must be host:port (got {address!r}).",
                          hint="Example: coordinator: 10.0.0.5:20408 (labgrid-coordinator's default port is 20408).",
                          code="NP-DEV-400")
    return address


def _farm_places(devices_file: Path, name: str, value: Any, coordinator: str | None) -> FarmPlaces:
    example = "labgrid: {tags: {np-target: rpi5}}"
    if coordinator is None:
        raise _config_error(devices_file, f"device '{name}' names labgrid places, but the file has no `farm:` "
                            "section.", "Add `farm: {coordinator: host:port}` at the top of devices.yaml.")
    if not isinstance(value, dict) or set(map(str, value)) - {"tags", "priority"}:
        raise _config_error(devices_file, f"labgrid of device '{name}' must be a mapping with tags (and optionally "
                            "priority).", f"Example: {example}")
    tags = value.get("tags")
    if not isinstance(tags, dict) or not tags:
        raise _config_error(devices_file, f"labgrid.tags of device '{name}' must be a mapping of at least one tag.",
                            f"Example: {example}")
    pairs = []
    for key, tag in tags.items():
        text = str(tag) if isinstance(tag, (str, int)) and not isinstance(tag, bool) else None
        if not _TAG.match(str(key)) or text is None or not _TAG_VALUE.match(text):
            raise _config_error(devices_file, f"labgrid tag {key!r}: {tag!r} of device '{name}' is not a labgrid tag.",
                                "Tag names are lower-case letters, digits, - and _ (starting with a letter); values "
                                "the same, plus dots.")
        pairs.append((str(key), text))
    priority = _integer(devices_file, name, value, "priority", 0, -100, 100)
    return FarmPlaces(coordinator=coordinator, tags=tuple(sorted(pairs)), priority=priority)


def load_farm(devices_file: Path | None) -> str | None:
    """The farm's coordinator address from devices.yaml, or None when the workspace has no farm."""
    if devices_file is None or not (devices_file.exists() or devices_file.is_symlink()):
        return None
    data = _read(devices_file) or {}
    return _coordinator(devices_file, data) if isinstance(data, dict) else None


def load_remote_devices(devices_file: Path | None) -> dict[str, RemoteDevice]:
    """SSH settings by device name; an absent file means no remote devices. Anything malformed (not YAML, not text,
    a port that is not a number from 1 to 65535, a destination that would read as an ssh option, a labgrid entry
    without a farm) is a ConfigError naming the file, the device and the setting."""
    if devices_file is None or not (devices_file.exists() or devices_file.is_symlink()):
        return {}
    data = _read(devices_file) or {}
    coordinator = _coordinator(devices_file, data) if isinstance(data, dict) else None
    entries = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{devices_file} must hold a `devices:` mapping of device name to settings.",
                          hint="Example: devices: {raspberry_pi_5: {ssh: pi@192.168.1.20, python: /usr/bin/python3}}",
                          code="NP-DEV-400")
    out: dict[str, RemoteDevice] = {}
    for name, settings in entries.items():
        if isinstance(settings, dict) and settings.get("labgrid") is not None and settings.get("ssh") is None:
            settings = {**settings, "ssh": "farm@place"}  # replaced by the place's NetworkService when acquired
            farm: FarmPlaces | None = _farm_places(devices_file, str(name), settings["labgrid"], coordinator)
        elif isinstance(settings, dict) and settings.get("labgrid") is not None:
            raise _config_error(devices_file, f"device '{name}' has both ssh and labgrid.",
                                "Keep one: `ssh:` for one board, `labgrid:` for any free farm place with the tags.")
        else:
            farm = None
        if not isinstance(settings, dict) or not settings.get("ssh"):
            raise _config_error(devices_file, f"device '{name}' needs an `ssh: user@host` destination (or "
                                "`labgrid: {tags: ...}` with a farm).",
                                "Add `ssh:` (and optionally port, python, identity_file).")
        unknown = sorted(set(map(str, settings)) - set(_KEYS))
        if unknown:
            raise _config_error(devices_file, f"unknown setting(s) {', '.join(unknown)} for device '{name}'.",
                                f"Settings: {', '.join(_KEYS)}.")
        destination = _text(devices_file, name, settings, "ssh", None) or ""
        if destination.startswith("-") or any(c.isspace() for c in destination):
            raise _config_error(devices_file, f"ssh of device '{name}' must be a destination like user@host "
                                f"(got {destination!r}).", "Put ssh options in ~/.ssh/config; ssh: takes user@host.")
        out[str(name)] = RemoteDevice(
            device=str(name),
            destination=destination,
            port=_integer(devices_file, name, settings, "port", 22, 1, 65535),
            python=_text(devices_file, name, settings, "python", "python3") or "python3",
            identity_file=_text(devices_file, name, settings, "identity_file", None),
            known_hosts=_text(devices_file, name, settings, "known_hosts", None),
            work_dir=_text(devices_file, name, settings, "work_dir", "/tmp/np-measure") or "/tmp/np-measure",
            connect_timeout=_integer(devices_file, name, settings, "connect_timeout", 10, 1, 3600),
            farm=farm,
            source=str(devices_file),
        )
    return out


def at_place(remote: RemoteDevice, *, address: str, username: str | None, port: int | None) -> RemoteDevice:
    """The device's settings with the destination of an acquired farm place (its NetworkService)."""
    return replace(remote, destination=f"{username}@{address}" if username else address, port=port or 22)


def remote_for(experiment: Experiment, device_name: str) -> RemoteDevice | None:
    """The device's SSH settings from the experiment's workspace devices.yaml, if any."""
    workspace = experiment.project.workspace
    return load_remote_devices(workspace.devices_file if workspace else None).get(device_name)


def remote_configured(experiment: Experiment, device_name: str) -> bool:
    return remote_for(experiment, device_name) is not None
