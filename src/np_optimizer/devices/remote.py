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


def _config_error(devices_file: Path, message: str, hint: str) -> ConfigError:
    return ConfigError(f"{devices_file}: {message}", hint=hint, code="NP-DEV-400")


def _read(devices_file: Path) -> Any:
    # the one YAML reader (UTF-8 only, no tags, bounded aliases and nesting); imported here: config sits above devices
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


def load_remote_devices(devices_file: Path | None) -> dict[str, RemoteDevice]:
    """SSH settings by device name; an absent file means no remote devices. Anything malformed (not YAML, not text,
    a port that is not a number from 1 to 65535, a destination that would read as an ssh option) is a ConfigError
    naming the file, the device and the setting."""
    if devices_file is None or not (devices_file.exists() or devices_file.is_symlink()):
        return {}
    data = _read(devices_file) or {}
    entries = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{devices_file} must hold a `devices:` mapping of device name to settings.",
                          hint="Example: devices: {raspberry_pi_5: {ssh: pi@192.168.1.20, python: /usr/bin/python3}}",
                          code="NP-DEV-400")
    out: dict[str, RemoteDevice] = {}
    for name, settings in entries.items():
        if not isinstance(settings, dict) or not settings.get("ssh"):
            raise _config_error(devices_file, f"device '{name}' needs an `ssh: user@host` destination.",
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
        )
    return out


def remote_for(experiment: Experiment, device_name: str) -> RemoteDevice | None:
    """The device's SSH settings from the experiment's workspace devices.yaml, if any."""
    workspace = experiment.project.workspace
    return load_remote_devices(workspace.devices_file if workspace else None).get(device_name)


def remote_configured(experiment: Experiment, device_name: str) -> bool:
    return remote_for(experiment, device_name) is not None
