"""The one process of np that talks to a labgrid coordinator (run as `python -m np_optimizer.profiler.measure.farm_agent
REQUEST_JSON`); np starts it per lease (farm.py) and per `np devices ls` of a farm.

Why a process of its own: gRPC stays out of np (its threads and fork handlers do not mix with np's measuring
subprocesses), and the lease outlives np by exactly as long as it takes to hand the place back. np holds the write end
of this process's stdin; when np ends, however it ends (done, failed, Ctrl+C, kill -9), the agent reads EOF and
releases the place and cancels the reservation. It runs in its own session, so a Ctrl+C on np's terminal does not
kill it before it has cleaned up.

Modes (field "mode" of the request):
  lease   reserve a place with the tags (labgrid's reservation: priority, then age, is the queue), poll it (which keeps
          it alive; labgrid expires a reservation not polled for 60 s), acquire the allocated place with the token's
          owner, report its NetworkService, wait for EOF on stdin, release, cancel.
  places  the places, reservations and exporters the coordinator knows.
Protocol: one JSON object per line on stdout ("event": reserved | waiting | acquired | released | places | error);
labgrid's own output goes to stderr. An "error" has a kind: unreachable, no_place, no_service, reservation_lost,
labgrid_error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["main"]

POLL_S = 0.5  # the reservation's poll interval (labgrid's own client polls every 1 s)
HEARTBEAT_S = 2.0  # a "waiting" event at least this often, even when nothing changed


def _emit(out: TextIO, event: str, **fields: Any) -> None:
    out.write(json.dumps({"event": event, **fields}) + "\n")
    out.flush()


class AgentError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


async def _connect(address: str, timeout_s: float) -> Any:
    from labgrid.remote.client import ClientSession

    session = ClientSession(address, asyncio.get_running_loop())
    try:
        await asyncio.wait_for(session.start(), timeout_s)
    except (Exception, asyncio.TimeoutError) as exc:  # a refused port ends the stream; a dead host times out
        raise AgentError("unreachable", f"the labgrid coordinator at {address} cannot be reached "
                                        f"({type(exc).__name__}: {str(exc).strip() or 'no answer'})") from exc
    return session


def _matches(tags: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(tags.get(k) == v for k, v in wanted.items())


def _places(session: Any) -> list[dict[str, Any]]:
    out = []
    for name, place in sorted(session.places.items()):
        services = []
        for exporter, groups in sorted(session.resources.items()):
            for group, resources in sorted(groups.items()):
                for rname, entry in sorted(resources.items()):
                    if entry.cls == "NetworkService" and place.hasmatch((exporter, group, entry.cls, rname)):
                        services.append({"exporter": exporter, "group": group, "name": rname,
                                         "available": bool(entry.avail), **_service(entry)})
        out.append({"name": name, "tags": dict(place.tags), "acquired": place.acquired,
                    "reservation": place.reservation, "comment": place.comment, "services": services})
    return out


def _service(entry: Any) -> dict[str, Any]:
    args = entry.args
    return {"address": args.get("address"), "username": args.get("username"), "port": args.get("port") or 22}


async def _reservations(session: Any) -> list[Any]:
    from labgrid.remote.common import Reservation
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

    response = await session.stub.GetReservations(pb2.GetReservationsRequest())
    return [Reservation.from_pb2(x) for x in response.reservations]


def _queue_view(session: Any, reservations: list[Any], token: str, tags: dict[str, str]) -> dict[str, Any]:
    """Our place in the queue: waiting reservations for the same tags that labgrid serves first (higher priority,
    then older), and the matching places with who holds them."""
    from labgrid.remote.common import ReservationState

    waiting = sorted((r for r in reservations if r.state is ReservationState.waiting),
                     key=lambda r: (-r.prio, r.created))
    same = [r for r in waiting if _matches(tags, (r.filters or {}).get("main", {}))
            or (r.filters or {}).get("main", {}) == tags]
    position = next((i + 1 for i, r in enumerate(same) if r.token == token), len(same) + 1)
    places = [p for p in session.places.values() if _matches(dict(p.tags), tags)]
    return {"position": position, "places": len(places),
            "busy": sorted(f"{p.name}: {p.acquired or 'reserved'}" for p in places if p.acquired or p.reservation)}


async def _lease(session: Any, request: dict[str, Any], out: TextIO, eof: asyncio.Future[bytes]) -> None:
    from labgrid import __version__ as labgrid_version
    from labgrid.remote.common import Reservation, ReservationState
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

    tags = {str(k): str(v) for k, v in request["tags"].items()}
    if not any(_matches(dict(p.tags), tags) for p in session.places.values()):
        raise AgentError("no_place", "no place of the farm has the tags " +
                         ", ".join(f"{k}={v}" for k, v in sorted(tags.items())))
    created = await session.stub.CreateReservation(pb2.CreateReservationRequest(
        filters={"main": pb2.Reservation.Filter(filter=tags)}, prio=float(request.get("priority", 0))))
    token = Reservation.from_pb2(created.reservation).token
    place_name: str | None = None
    acquired = False
    try:
        _emit(out, "reserved", token=token)
        t0, last, told = time.monotonic(), None, 0.0
        while place_name is None:
            if eof.done():
                return  # np is gone or gave up while waiting: cancel (finally)
            res = Reservation.from_pb2((await session.stub.PollReservation(pb2.PollReservationRequest(
                token=token))).reservation)
            if res.state is ReservationState.allocated:
                place_name = res.allocations["main"][0]
                break
            if res.state is not ReservationState.waiting:
                raise AgentError("reservation_lost", f"the reservation {token} became {res.state.name}")
            view = _queue_view(session, await _reservations(session), token, tags)
            if view != last or time.monotonic() - told > HEARTBEAT_S:  # np checks its estimate on each event
                _emit(out, "waiting", waited_s=time.monotonic() - t0, **view)
                last, told = view, time.monotonic()
            await asyncio.wait([eof], timeout=POLL_S)
        await session.stub.AcquirePlace(pb2.AcquirePlaceRequest(placename=place_name))
        acquired = True
        await session.sync_with_coordinator()
        place = session.places[place_name]
        services = []
        for exporter, group, cls, rname in place.acquired_resources:
            entry = session.resources.get(exporter, {}).get(group, {}).get(rname)
            if cls == "NetworkService" and entry is not None and entry.avail:
                services.append({"exporter": exporter, **_service(entry)})
        if not services:
            raise AgentError("no_service", f"place {place_name} has no available NetworkService (its exporter may "
                                           "be down, or the place has no match for one)")
        _emit(out, "acquired", place=place_name, token=token, tags=dict(place.tags), owner=place.acquired,
              labgrid_version=labgrid_version, waited_s=time.monotonic() - t0, **services[0])
        await eof  # np measures; its end (or death) closes our stdin
    finally:
        await asyncio.shield(_give_back(session, token, place_name if acquired else None, out))


async def _give_back(session: Any, token: str, place: str | None, out: TextIO) -> None:
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

    errors = []
    if place is not None:
        try:
            await session.stub.ReleasePlace(pb2.ReleasePlaceRequest(placename=place))
        except Exception as exc:  # keep going: the reservation must go too
            errors.append(f"release {place}: {exc}")
    try:
        await session.stub.CancelReservation(pb2.CancelReservationRequest(token=token))
    except Exception as exc:
        errors.append(f"cancel {token}: {exc}")
    _emit(out, "released", place=place, token=token, errors=errors)


def _stdin_eof() -> asyncio.Future[bytes]:
    """A future done when stdin ends (np closed it or died), read by a daemon thread: an executor thread would keep
    the agent alive until then."""
    loop = asyncio.get_running_loop()
    eof: asyncio.Future[bytes] = loop.create_future()

    def read() -> None:
        data = sys.stdin.buffer.read()
        def finish() -> None:
            if not eof.done():
                eof.set_result(data)

        try:
            loop.call_soon_threadsafe(finish)
        except RuntimeError:  # the loop has ended already
            pass

    threading.Thread(target=read, daemon=True).start()
    return eof


async def _run(request: dict[str, Any], out: TextIO) -> int:
    eof = _stdin_eof()
    session = await _connect(request["coordinator"], float(request.get("connect_timeout", 10)))
    try:
        if request["mode"] == "places":
            reservations = [r.asdict() | {"state": r.state.name} for r in await _reservations(session)]
            _emit(out, "places", places=_places(session), reservations=reservations,
                  exporters=sorted(session.resources))
        else:
            await _lease(session, request, out, eof)
    finally:
        try:
            await asyncio.wait_for(session.stop(), 5)
            await session.close()
        except Exception:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    request = json.loads((argv if argv is not None else sys.argv[1:])[0])
    out = os.fdopen(os.dup(1), "w")  # the protocol; labgrid's prints go to stderr
    os.dup2(2, 1)
    try:
        return asyncio.run(_run(request, out))
    except AgentError as exc:
        _emit(out, "error", kind=exc.kind, message=str(exc))
        return 3
    except Exception as exc:  # a gRPC error of the coordinator, or a labgrid bug: one line for np
        details = getattr(exc, "details", None)
        text = details() if callable(details) else str(exc)
        _emit(out, "error", kind="labgrid_error", message=f"{type(exc).__name__}: {text}".strip())
        return 3


if __name__ == "__main__":
    sys.exit(main())
