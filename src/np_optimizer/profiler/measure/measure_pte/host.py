"""The document's "host" section: what machine measured (CPU model, cores, governor, load)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Dict, List, Optional

from .protocol import Json

_CPUINFO_KEYS = ("model name", "Model", "Hardware", "CPU implementer", "CPU part", "Processor", "cpu model")
# "CPU part" of Arm Ltd cores (implementer 0x41): arm64 kernels print no model name
_ARM_PARTS = {"0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55",
              "0xd07": "Cortex-A57", "0xd08": "Cortex-A72", "0xd09": "Cortex-A73",
              "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76", "0xd0d": "Cortex-A77",
              "0xd41": "Cortex-A78", "0xd46": "Cortex-A510", "0xd47": "Cortex-A710",
              "0xd4d": "Cortex-A715", "0xd80": "Cortex-A520", "0xd81": "Cortex-A720",
              "0xd0c": "Neoverse-N1", "0xd40": "Neoverse-V1", "0xd49": "Neoverse-N2"}


def _cpuinfo() -> Dict[str, str]:
    """The first value of each key of interest in /proc/cpuinfo."""
    info: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" not in line:
                    continue
                k, v = [s.strip() for s in line.split(":", 1)]
                if k in _CPUINFO_KEYS and k not in info:
                    info[k] = v
    except OSError:
        pass
    return info


def _lscpu_model() -> Optional[str]:
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=5, env=dict(os.environ, LC_ALL="C")).stdout
        for line in out.splitlines():
            if line.strip().startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except Exception:
        pass
    return None


def cpu_model() -> Optional[str]:
    info = _cpuinfo()
    model = info.get("model name") or info.get("cpu model") or info.get("Processor")
    if not model:
        model = _lscpu_model()
    if not model and info.get("CPU implementer") == "0x41":
        model = _ARM_PARTS.get(info.get("CPU part", "").lower())
    return model or platform.processor() or None


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").strip("\x00\n ") or None
    except OSError:
        return None


def host_info() -> Json:
    try:
        affinity: Optional[int] = len(os.sched_getaffinity(0))
    except Exception:  # not on macOS
        affinity = None
    try:
        load: Optional[List[float]] = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": affinity,
        "device_model": _read_text("/proc/device-tree/model"),
        "cpufreq_governor": _read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "loadavg_at_start": load,
    }
