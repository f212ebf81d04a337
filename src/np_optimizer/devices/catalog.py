"""The device catalogue: one table of data read by validation, profiling, `np devices ls` and the docs.

A row says which runtime and backend a device uses, which MLIA target profile (if any) models its NPU, and for each
profiling method which metrics that method gives on it. Adding a device is adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import Backend, get_backend
from np_optimizer.errors import NotFoundError, UnsupportedError
from np_optimizer.metrics import HEADLINE
from np_optimizer.metrics import MetricType as M
from np_optimizer.records.base import Record  # ==, hash(), repr() shared: cheaper to define

if TYPE_CHECKING:
    from np_optimizer.records import DeviceRecord

__all__ = [
    "MethodSupport",
    "Device",
    "DEVICES",
    "METHODS",
    "get_device",
    "find_device",
    "backend_schemes",
    "default_method",
    "method_support",
]

@dataclass(frozen=True, eq=False, repr=False)
class MethodSupport(Record):
    """What one profiling method gives on one device."""

    method: str
    result_kind: str  # "estimated" | "measured"
    metrics: tuple[M, ...]
    requires: str | None = None  # a precondition the user must meet (e.g. an SSH destination)
    note: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class Device(Record):
    name: str
    display_name: str
    runtime: str
    backend: str
    chipset: str
    architecture: str
    memory: str
    methods: tuple[MethodSupport, ...]
    mlia_target: str | None = None  # MLIA target profile; also the Ethos-U compile target
    local: bool = False  # True only for `host`: measured in a subprocess on this machine
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def backend_spec(self) -> Backend:
        """The registered Backend this row names (its schemes, lowering, where its programs run)."""
        return get_backend(self.backend)

    def method(self, name: str) -> MethodSupport | None:
        return next((m for m in self.methods if m.method == name), None)

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(m.method for m in self.methods)

    def record(self) -> DeviceRecord:
        """The row as `np devices ls --json` prints it."""
        from np_optimizer.records import DeviceRecord
        from np_optimizer.records.commands import DeviceMethod

        return DeviceRecord(
            device=self.name, display_name=self.display_name, runtime=self.runtime, backend=self.backend,
            chipset=self.chipset, architecture=self.architecture, memory=self.memory, mlia_target=self.mlia_target,
            methods={m.method: DeviceMethod(m.result_kind, tuple(str(x) for x in m.metrics), m.requires, m.note)
                     for m in self.methods},
            notes=self.notes)


_STATIC = (M.MACS, M.PARAMS)
_MEASURED = HEADLINE
_ESTIMATED_NPU = HEADLINE

_MLIA_CPU = MethodSupport(
    "mlia",
    "estimated",
    _STATIC,
    note="MLIA estimates Ethos-U NPUs only; for a CPU target np counts MACs and parameters from the exported graph.",
)
_SSH_MEASURED = MethodSupport(
    "on-device",
    "measured",
    _MEASURED,
    requires="an SSH destination for the device in the workspace's devices.yaml",
    note="Runs the .pte with the device's ExecuTorch runtime over SSH.",
)
_HOST_MEASURED = MethodSupport(
    "on-device",
    "measured",
    _MEASURED,
    note="Runs the .pte with ExecuTorch in a fresh subprocess on this machine.",
)


def _mlia_npu(target: str) -> MethodSupport:
    return MethodSupport(
        "mlia",
        "estimated",
        _ESTIMATED_NPU,
        note=f"Static estimate by MLIA/Vela for {target}; float checkpoints are int8-quantized by MLIA first.",
    )


_XNNPACK_DEVICE = {"runtime": "executorch", "backend": "xnnpack", "methods": (_MLIA_CPU, _SSH_MEASURED)}

DEVICES: tuple[Device, ...] = (
    Device(
        name="raspberry_pi_5",
        display_name="Raspberry Pi 5",
        chipset="Broadcom BCM2712, 4x Cortex-A76 @ 2.4 GHz",
        architecture="aarch64",
        memory="4-16 GB LPDDR4X",
        **_XNNPACK_DEVICE,  # type: ignore[arg-type]
    ),
    Device(
        name="aws_graviton4",
        display_name="AWS Graviton4",
        chipset="AWS Graviton4, Neoverse V2",
        architecture="aarch64",
        memory="instance-dependent DDR5",
        **_XNNPACK_DEVICE,  # type: ignore[arg-type]
    ),
    Device(
        name="vivo_x300_pro",
        display_name="vivo X300 Pro (Android)",
        chipset="MediaTek Dimensity 9500",
        architecture="aarch64",
        memory="12-16 GB LPDDR5X",
        **_XNNPACK_DEVICE,  # type: ignore[arg-type]
        notes="On-device needs an SSH server on the phone (e.g. Termux); adb is not supported.",
    ),
    Device(
        name="host",
        display_name="This machine",
        runtime="executorch",
        backend="xnnpack",
        chipset="this machine's CPU (read at measurement time)",
        architecture="native",
        memory="this machine's RAM",
        methods=(_MLIA_CPU, _HOST_MEASURED),
        local=True,
        notes="Measured locally; figures describe this machine, not an edge device.",
    ),
    Device(
        name="alif_e8",
        display_name="Alif Ensemble E8 (Ethos-U85)",
        runtime="executorch",
        backend="ethos-u",
        chipset="Cortex-M55 + Ethos-U85-256",
        architecture="armv8.1-m",
        memory="on-chip SRAM + external memory",
        methods=(_mlia_npu("ethos-u85-256"),),
        mlia_target="ethos-u85-256",
        notes="On-device needs firmware flashing and RTT capture, which np does not do; use mlia.",
    ),
    Device(
        name="corstone_300",
        display_name="Arm Corstone-300 (MPS3, Ethos-U55)",
        runtime="executorch",
        backend="ethos-u",
        chipset="Cortex-M55 + Ethos-U55-128",
        architecture="armv8.1-m",
        memory="on-chip SRAM + external memory",
        methods=(_mlia_npu("ethos-u55-128"),),
        mlia_target="ethos-u55-128",
        notes="On-device needs the FVP or an MPS3 board, which np does not drive; use mlia.",
    ),
)

_BY_NAME = {d.name: d for d in DEVICES}
# The profiling methods the catalogue offers (each a module of profiler/methods/; a test checks they match).
METHODS = tuple(dict.fromkeys(m.method for d in DEVICES for m in d.methods))

def backend_schemes(backend: str) -> tuple[str, ...]:
    """Graph-quantize schemes the backend's quantizer supports (from its registered Backend)."""
    return get_backend(backend).scheme_names


def get_device(name: str) -> Device:
    """The catalogue row for `name`, or a NotFoundError listing the known devices."""
    device = _BY_NAME.get(name)
    if device is None:
        known = ", ".join(_BY_NAME)
        raise NotFoundError(
            f"Unknown device '{name}'.",
            hint=f"Known devices: {known}. See `np devices ls`.",
            code="NP-DEV-404",
        )
    return device


def find_device(name: str, runtime: str | None = None, backend: str | None = None) -> Device:
    """The catalogue row for `name`, checking that an explicitly given runtime and backend match it."""
    device = get_device(name)
    for label, given, actual in (("runtime", runtime, device.runtime), ("backend", backend, device.backend)):
        if given is not None and given.lower() != actual:
            raise UnsupportedError(
                f"Device '{name}' uses {label} '{actual}', not '{given}'.",
                hint=f"Omit --{label}, or pick a device with `np devices ls --filter {label}={given}`.",
                code="NP-DEV-422",
            )
    return device


def default_method(device: Device, *, remote_configured: bool = False) -> str:
    """The method used when none is asked for: measured where np can measure the device, else mlia."""
    if device.local or (remote_configured and device.method("on-device") is not None):
        return "on-device"
    return "mlia"


def method_support(device: Device, method: str, *, remote_configured: bool = False) -> MethodSupport:
    """What `method` gives on `device`, or an UnsupportedError that says what the device offers instead."""
    support = device.method(method)
    if support is None:
        raise UnsupportedError(
            f"Method '{method}' is not available for device '{device.name}'.",
            hint=f"Methods for {device.name}: {', '.join(device.method_names)}. {device.notes}".strip(),
            code="NP-PRF-422",
        )
    if support.requires and not remote_configured and not device.local:
        raise UnsupportedError(
            f"Method '{method}' on '{device.name}' needs {support.requires}.",
            hint=f"Add `devices: {{{device.name}: {{ssh: user@host, python: /path/to/python}}}}` to the workspace's "
            "devices.yaml, or use --method mlia.",
            code="NP-PRF-424",
        )
    return support
