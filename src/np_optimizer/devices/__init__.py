"""Devices: the catalogue (one row per device), the backends its rows reference, and remote settings (devices.yaml).

    catalog.py     Device rows and what each profiling method gives on them
    backends.py    one registered Backend per compiler backend (schemes, lowering, host-runnable, MLIA-estimable)
    remote.py      the workspace's devices.yaml: how a device is reached (never in run.yaml)
    compat_doc.py  docs/compatibility.md, generated from the rows and the backends
"""

from np_optimizer.devices.catalog import (
    DEVICES,
    METHODS,
    Device,
    MethodSupport,
    backend_schemes,
    default_method,
    find_device,
    get_device,
    method_support,
)

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
