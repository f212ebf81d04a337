"""The workspace's device settings (devices.yaml): where a remote device is reached, never in run.yaml.

    devices:
      raspberry_pi_5:
        ssh: pi@192.168.1.20        # destination (user@host)
        port: 22
        python: /home/pi/et/bin/python   # a Python with the ExecuTorch runtime
        identity_file: ~/.ssh/id_ed25519
        known_hosts: ~/.ssh/known_hosts   # optional
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from np_optimizer.errors import ConfigError

if TYPE_CHECKING:
    from np_optimizer.workspace import Experiment

__all__ = ["RemoteDevice", "load_remote_devices", "remote_for", "remote_configured"]

_KEYS = ("ssh", "port", "python", "identity_file", "known_hosts", "work_dir", "connect_timeout")


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


def load_remote_devices(devices_file: Path | None) -> dict[str, RemoteDevice]:
    """SSH settings by device name; an absent file means no remote devices."""
    if devices_file is None or not devices_file.is_file():
        return {}
    try:
        data: Any = yaml.safe_load(devices_file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{devices_file} is not valid YAML: {exc}".splitlines()[0],
                          hint="Fix the file; see the format in the README (Remote devices).", code="NP-DEV-400") from exc
    entries = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{devices_file} must hold a `devices:` mapping of device name to settings.",
                          hint="Example: devices: {raspberry_pi_5: {ssh: pi@192.168.1.20, python: /usr/bin/python3}}",
                          code="NP-DEV-400")
    out: dict[str, RemoteDevice] = {}
    for name, settings in entries.items():
        if not isinstance(settings, dict) or not settings.get("ssh"):
            raise ConfigError(f"{devices_file}: device '{name}' needs an `ssh: user@host` destination.",
                              hint="Add `ssh:` (and optionally port, python, identity_file).", code="NP-DEV-400")
        unknown = sorted(set(settings) - set(_KEYS))
        if unknown:
            raise ConfigError(f"{devices_file}: unknown setting(s) {', '.join(unknown)} for device '{name}'.",
                              hint=f"Settings: {', '.join(_KEYS)}.", code="NP-DEV-400")
        out[str(name)] = RemoteDevice(
            device=str(name),
            destination=str(settings["ssh"]),
            port=int(settings.get("port", 22)),
            python=str(settings.get("python", "python3")),
            identity_file=str(settings["identity_file"]) if settings.get("identity_file") else None,
            known_hosts=str(settings["known_hosts"]) if settings.get("known_hosts") else None,
            work_dir=str(settings.get("work_dir", "/tmp/np-measure")),
            connect_timeout=int(settings.get("connect_timeout", 10)),
        )
    return out


def remote_for(experiment: Experiment, device_name: str) -> RemoteDevice | None:
    """The device's SSH settings from the experiment's workspace devices.yaml, if any."""
    workspace = experiment.project.workspace
    return load_remote_devices(workspace.devices_file if workspace else None).get(device_name)


def remote_configured(experiment: Experiment, device_name: str) -> bool:
    return remote_for(experiment, device_name) is not None
