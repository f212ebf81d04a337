"""A board farm through labgrid: the device queue of a device named by tags in devices.yaml is a labgrid reservation.

    with FarmLease("raspberry_pi_5", remote, expected_s=12.0, on_status=show) as lease:
        measure_remote(target_for(lease.remote), ...)      # lease.remote: the acquired place's NetworkService

The lease runs farm_agent.py in a process of its own, which reserves a place with the tags (labgrid orders waiting
reservations by priority, then age: that is the queue, shared by every machine and CI job using the coordinator),
acquires the allocated place, and reports its NetworkService (address, user, port). np then measures over its usual SSH
transport. On exit (or np's death: the agent sees its stdin end) the agent releases the place and cancels the
reservation. While waiting, np reports its position among the reservations for the same tags and an estimated wait:
the expected duration of one round (from earlier rounds on this device, device_queue.expected_duration) times the
rounds that run before it, spread over the matching places.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any

from np_optimizer.errors import DeviceUnreachableError, MeasureError
from np_optimizer.profiler.measure import measure_failure
from np_optimizer.profiler.measure.device_queue import QueueStatus
from np_optimizer.workspace.remote import RemoteDevice, at_place

__all__ = ["FarmLease", "farm_places", "AGENT_MODULE"]

AGENT_MODULE = "np_optimizer.profiler.measure.farm_agent"
RELEASE_WAIT_S = 30.0  # how long np waits for the agent to hand the place back before leaving it to the agent

_HINTS = {
    "unreachable": ("NP-FRM-503", "Check that labgrid-coordinator runs at farm.coordinator in devices.yaml and that "
                                  "this machine reaches it (labgrid-client -x HOST:PORT places)."),
    "no_place": ("NP-FRM-404", "Tag a place for it: labgrid-client -x HOST:PORT -p PLACE set-tags KEY=VALUE, or fix "
                               "labgrid.tags of the device in devices.yaml."),
    "no_service": ("NP-FRM-502", "Check that the place's exporter runs (labgrid-client resources) and that the "
                                 "place matches its NetworkService (labgrid-client -p PLACE show)."),
    "reservation_lost": ("NP-FRM-502", "The coordinator dropped the reservation (restarted, or the place was "
                                       "deleted); try again."),
    "labgrid_error": ("NP-FRM-502", "See the labgrid message; `labgrid-client places` shows the farm's state."),
    "agent_died": ("NP-FRM-502", "See logs/libraries.log; `labgrid-client places` shows the farm's state."),
}


def _failure(kind: str, message: str, tail: list[str] | None = None) -> MeasureError | DeviceUnreachableError:
    code, hint = _HINTS.get(kind, _HINTS["labgrid_error"])
    return measure_failure(code, message, hint, kind=f"farm_{kind}", stderr_tail=tail)


def _agent(request: dict[str, Any], stdin: int | None) -> tuple[subprocess.Popen[str], IO[bytes]]:
    """Start the agent in its own session (a Ctrl+C meant for np must not kill it before it cleaned up)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", AGENT_MODULE, json.dumps(request)], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
                            env={**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "0"})
    return proc, err


def _tail(err: IO[bytes]) -> list[str]:
    err.seek(0)
    return [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()][-10:]


def farm_places(coordinator: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """The coordinator's places (tags, who acquired each, reservation, NetworkService), reservations and exporters."""
    proc, err = _agent({"mode": "places", "coordinator": coordinator, "connect_timeout": timeout_s},
                       subprocess.DEVNULL)
    with err:
        try:
            out, _ = proc.communicate(timeout=timeout_s + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        for event in events:
            if event.get("event") == "places":
                return dict(event)
            if event.get("event") == "error":
                raise _failure(event.get("kind", ""), f"Farm {coordinator}: {event.get('message')}.", _tail(err))
        raise _failure("agent_died", f"The labgrid client for {coordinator} ended without an answer "
                       f"(exit {proc.returncode}).", _tail(err))


@dataclass
class FarmLease:
    """One place of the farm, held around one measurement. Looks like DeviceLock to the on-device method (waited_s,
    acquired_at, released_at, fileno, context manager); `remote` and `place` say where it runs."""

    device: str
    remote: RemoteDevice | None  # set: the device's settings; once acquired, at the place's NetworkService
    expected_s: float
    label: str | None = None
    on_status: Callable[[QueueStatus], None] = lambda _status: None
    warn_slack_s: float = 2.0
    warn_slack_ratio: float = 0.25
    waited_s: float = 0.0
    acquired_at: float | None = None
    released_at: float | None = None
    place: dict[str, Any] = field(default_factory=dict)  # the agent's "acquired" event: place, exporter, tags, ...
    release_errors: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)
    _err: IO[bytes] | None = field(default=None, repr=False)

    def fileno(self) -> int | None:
        return None  # nothing local to inherit: the coordinator holds the lease

    def estimate(self, position: int, places: int) -> float:
        """Rounds that run before ours (ahead in the queue, plus the ones on the places now), spread over the places."""
        return self.expected_s * math.ceil(max(0, position) / max(1, places))

    def acquire(self) -> FarmLease:
        assert self.remote is not None and self.remote.farm is not None
        farm = self.remote.farm
        farm_remote = self.remote
        request = {"mode": "lease", "coordinator": farm.coordinator, "tags": farm.tag_dict,
                   "priority": farm.priority, "connect_timeout": self.remote.connect_timeout}
        self._proc, self._err = _agent(request, subprocess.PIPE)
        t0 = time.monotonic()
        deadline, warned_at, first = 0.0, None, True
        last: tuple[int, int] | None = None
        try:
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                if not line.startswith("{"):
                    continue
                event = json.loads(line)
                kind = event.get("event")
                waited = time.monotonic() - t0
                if kind == "waiting":
                    position, places = int(event.get("position", 1)), int(event.get("places", 1))
                    estimate = self.estimate(position, places)
                    if (position, places) != last:  # a new place in the queue: announce it with a new estimate
                        first, last, warned_at = False, (position, places), None
                        deadline = waited + estimate
                        busy = [str(b) for b in event.get("busy", [])]
                        self.on_status(QueueStatus("waiting", self.device, position, estimate, waited,
                                                   {"label": ", ".join(busy)} if busy else None,
                                                   tuple({"label": b} for b in busy)))
                    elif waited > deadline + max(self.warn_slack_s, self.warn_slack_ratio * deadline) and \
                            (warned_at is None or waited > 2 * warned_at):
                        self.on_status(QueueStatus("wait_exceeds_estimate", self.device, position, deadline, waited,
                                                   new_estimate_s=estimate))
                        warned_at = waited
                elif kind == "acquired":
                    self.place = event
                    self.acquired_at = time.time()
                    self.waited_s = waited
                    self.remote = at_place(farm_remote, address=str(event["address"]),
                                           username=event.get("username"), port=event.get("port"))
                    self.on_status(QueueStatus("acquired", self.device, waited_s=waited, immediate=first))
                    return self
                elif kind == "error":
                    raise _failure(str(event.get("kind")), f"Farm device {self.device}: {event.get('message')}.",
                                   self._stderr())
            raise _failure("agent_died", f"The labgrid client of device {self.device} ended before a place was "
                           f"acquired (exit {self._proc.wait()}).", self._stderr())
        except BaseException:
            self._give_back()
            raise

    def _stderr(self) -> list[str]:
        return _tail(self._err) if self._err is not None else []

    def _give_back(self) -> None:
        """Close the agent's stdin (it releases and cancels), then wait for it to say so."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            out, _ = proc.communicate(timeout=RELEASE_WAIT_S)  # closes its stdin first, then reads to its end
            for line in out.splitlines():
                if line.startswith("{") and (event := json.loads(line)).get("event") == "released":
                    self.release_errors = [str(e) for e in event.get("errors", [])]
        except subprocess.TimeoutExpired:  # it keeps trying on its own; np does not wait longer
            self.release_errors = [f"the labgrid client did not finish releasing within {RELEASE_WAIT_S:g} s"]
        except (OSError, ValueError) as exc:
            self.release_errors = [f"the labgrid client could not be told to release: {exc}"]
        finally:
            if self._err is not None:
                self._err.close()
                self._err = None
            if self.place and self.release_errors:
                self.place["release_errors"] = list(self.release_errors)

    def release(self) -> None:
        if self._proc is None:
            return
        self._give_back()
        self.released_at = time.time()

    def __enter__(self) -> FarmLease:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
