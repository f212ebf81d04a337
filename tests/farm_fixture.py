"""A labgrid board farm on loopback, for tests: a real `labgrid-coordinator` on a free 127.0.0.1 port in its own
folder, and real `labgrid-exporter`s whose configuration exports NetworkService resources (pointing at the test's
sshd); places are created, matched and tagged with `labgrid-client`, as a team would (or, to start faster,
written to the coordinator's places.yaml, where it keeps what labgrid-client made). Copied from labgrid's own
tests/conftest.py in spirit: start the processes, wait for their ready lines, stop them by pid.

    farm = Farm.start(root, places={"rpi5-a": ("shelf/rpi5-a/NetworkService", {"np-target": "rpi5"}), ...})
    farm.add_exporter("shelf", {"rpi5-a": service, "rpi5-b": service})
    farm.add_places({"rpi5-c": ("dying/rpi5-c/NetworkService", {"np-target": "doomed"})})   # with labgrid-client
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tests.sshd_fixture import free_port

BIN = Path(sys.executable).parent
ENV = {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "0", "PYTHONUNBUFFERED": "1"}


def _tool(name: str) -> str:
    return str(BIN / name) if (BIN / name).exists() else shutil.which(name) or name


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()}): {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Farm:
    def __init__(self, root: Path, port: int, coordinator: subprocess.Popen[bytes]) -> None:
        self.root = root
        self.address = f"127.0.0.1:{port}"
        self.coordinator: subprocess.Popen[bytes] | None = coordinator
        self.exporters: dict[str, subprocess.Popen[bytes]] = {}

    @classmethod
    def start(cls, root: Path, places: dict[str, tuple[str, dict[str, str]]] | None = None) -> Farm:
        """The coordinator; `places` (name: (match, tags)) are written to its places.yaml first, the file where the
        coordinator keeps the places labgrid-client made: the same places, without a labgrid-client start per step."""
        root.mkdir(parents=True, exist_ok=True)
        if places:
            now = time.time()
            (root / "places.yaml").write_text(yaml.safe_dump({name: {
                "aliases": [], "comment": "", "tags": dict(tags), "created": now, "changed": now,
                "matches": [dict(zip(("exporter", "group", "cls"), match.split("/")), name=None, rename=None)]}
                for name, (match, tags) in places.items()}))
        port = free_port()
        log = root / "coordinator.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([_tool("labgrid-coordinator"), "--listen", f"127.0.0.1:{port}"], cwd=root,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=ENV)
        farm = cls(root, port, proc)
        try:
            _wait_for(log, "listening on", proc, "labgrid-coordinator")
        except BaseException:
            farm.stop()
            raise
        return farm

    def add_exporter(self, name: str, groups: dict[str, dict[str, Any]]) -> subprocess.Popen[bytes]:
        """An exporter publishing one NetworkService per group (its parameters: address, username, port)."""
        config = self.root / f"exporter-{name}.yaml"
        config.write_text(yaml.safe_dump({group: {"NetworkService": dict(params)} for group, params in groups.items()}))
        log = self.root / f"exporter-{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([_tool("labgrid-exporter"), "--name", name, "--coordinator", self.address,
                                     str(config)], cwd=self.root, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=ENV)
        self.exporters[name] = proc
        _wait_for(log, "Exporter ready", proc, f"labgrid-exporter {name}")
        return proc

    def client(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([_tool("labgrid-client"), "-x", self.address, *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)

    def add_places(self, places: dict[str, tuple[str, dict[str, str]]]) -> None:
        """Create each place, add its match and set its tags with labgrid-client (the places side by side)."""
        for step in ("create", "add-match", "set-tags"):
            procs = []
            for place, (match, tags) in places.items():
                args = {"create": ["create"], "add-match": ["add-match", match],
                        "set-tags": ["set-tags", *(f"{k}={v}" for k, v in tags.items())]}[step]
                procs.append((place, self.client("-p", place, *args)))
            for place, proc in procs:
                out, _ = proc.communicate(timeout=60)
                if proc.returncode:
                    raise RuntimeError(f"labgrid-client {step} for {place} failed: {out.decode(errors='replace')}")

    def log_count(self, text: str) -> int:
        """How often the coordinator's output says `text` (it prints each acquire and release): cheaper to poll than a
        client."""
        return (self.root / "coordinator.log").read_text(errors="replace").count(text)

    def show(self, place: str) -> str:
        out, _ = self.client("-p", place, "show").communicate(timeout=60)
        return out.decode(errors="replace")

    def stop(self) -> None:
        for proc in self.exporters.values():
            _stop(proc)
        _stop(self.coordinator)
        self.coordinator = None

    def __enter__(self) -> Farm:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
