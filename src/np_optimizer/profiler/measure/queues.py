"""Which queue a measurement waits in before it may use its device: one registry, the one place a new kind is added.

    local    this machine's per-device lock (device_queue.DeviceLock): host and plain SSH devices
    labgrid  a labgrid reservation and place (farm.FarmLease): devices that devices.yaml names by farm tags

Each entry is a `Slot`: a context manager held around the measurement only (the timeout starts inside), with the time
waited, the wall-clock window it was held, and `remote`, the destination to measure on once it is held (a farm slot
fills it from the place's NetworkService). The first entry whose `applies(remote)` is true is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from np_optimizer.profiler.measure.device_queue import DeviceLock, QueueStatus
from np_optimizer.registry import Registry
from np_optimizer.workspace.remote import RemoteDevice

__all__ = ["Slot", "Queue", "register_queue", "registered_queues", "queue_for"]


class Slot(Protocol):
    waited_s: float
    acquired_at: float | None
    released_at: float | None
    remote: RemoteDevice | None
    place: dict[str, Any]  # where a farm slot ran (place, exporter, tags, labgrid version); empty elsewhere

    def fileno(self) -> int | None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


SlotFactory = Callable[[str, RemoteDevice | None, float, str, Callable[[QueueStatus], None]], Slot]


@dataclass(frozen=True)
class Queue:
    name: str
    applies: Callable[[RemoteDevice | None], bool]
    make: SlotFactory  # (device key, remote, expected seconds, label, on_status) -> Slot


# Asked in registration order: the first queue that applies to a device serves it (labgrid before local).
_QUEUES: Registry[Queue] = Registry("device queue")


def register_queue(name: str, applies: Callable[[RemoteDevice | None], bool]) -> Callable[[SlotFactory], SlotFactory]:
    def register(make: SlotFactory) -> SlotFactory:
        _QUEUES.register(name, Queue(name, applies, make))
        return make

    return register


@register_queue("labgrid", lambda remote: remote is not None and remote.farm is not None)
def _farm(device: str, remote: RemoteDevice | None, expected_s: float, label: str,
          on_status: Callable[[QueueStatus], None]) -> Slot:
    from np_optimizer.profiler.measure.farm import FarmLease

    assert remote is not None
    return FarmLease(device, remote, expected_s, label=label, on_status=on_status)


@register_queue("local", lambda _remote: True)
def _local(device: str, remote: RemoteDevice | None, expected_s: float, label: str,
           on_status: Callable[[QueueStatus], None]) -> Slot:
    return DeviceLock(device, expected_s, label=label, on_status=on_status, warn_slack_s=2.0, warn_slack_ratio=0.25,
                      remote=remote)


def registered_queues() -> tuple[str, ...]:
    return _QUEUES.names()


def queue_for(remote: RemoteDevice | None) -> Queue:
    return next(q for q in _QUEUES.entries() if q.applies(remote))
