"""Measuring on a labgrid board farm, for real and on loopback only: a private sshd (the "boards"), a real
labgrid-coordinator and labgrid-exporter exporting two NetworkService places tagged np-target=rpi5 that point at it,
and devices.yaml naming the device by those tags. One farm (coordinator + exporter + places) and one finished run
serve the whole module; each test works on its own copy of the workspace, and a test that needs another farm (a dead
exporter) starts its own.

Run alone: `pytest -m farm`. sshd comes from openssh-server (scripts/test.sh installs it), labgrid from the lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.profiler.measure.farm import farm_places
from np_optimizer.records import to_dict
from tests.farm_fixture import Farm
from tests.helpers import copy_workspace, make_project
from tests.sshd_fixture import INSTALL_COMMAND, SshServer, free_port, sshd_available

pytestmark = [pytest.mark.farm, pytest.mark.own_steps]  # own_steps: a run killed mid-way needs steps that run

DEVICE = "raspberry_pi_5"
PLACES = ("rpi5-a", "rpi5-b")
LONG = "num_executions=1000000,warmup=1,timeout=1"  # each round holds its place past the 1 s timeout (partial result)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if not sshd_available():
        if os.environ.get("NP_SKIP_SSH_TESTS") == "1":
            pytest.skip("sshd is not installed and NP_SKIP_SSH_TESTS=1")
        pytest.fail(f"The farm tests need sshd (openssh-server): {INSTALL_COMMAND}", pytrace=False)
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory, sshd: SshServer) -> Iterator[Farm]:
    places = {place: (f"shelf/{place}/NetworkService", {"np-target": "rpi5"}) for place in PLACES}
    with Farm.start(tmp_path_factory.mktemp("labgrid"), places=places) as lab:
        service = {"address": sshd.host, "username": sshd.user, "port": sshd.port}
        lab.add_exporter("shelf", {place: service for place in PLACES})
        yield lab


def devices_yaml(farm_address: str, sshd: SshServer, work: Path, tags: str = "rpi5") -> str:
    return (f"farm:\n  coordinator: {farm_address}\ndevices:\n  {DEVICE}:\n    labgrid: {{tags: {{np-target: {tags}}}}}\n"
            f"    python: {sys.executable}\n    identity_file: {sshd.client_key}\n    work_dir: {work}\n"
            f"    connect_timeout: 5\n")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, module_cache: Path, farm: Farm,
             sshd: SshServer) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A finished run on raspberry_pi_5, then the first farm round of its graph_optimize checkpoint (which compiles
    it), as `np profile -d raspberry_pi_5 --method on-device --json` prints it. In-process: torch loads once."""
    from np_optimizer import api

    root = tmp_path_factory.mktemp("farm-ws")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NP_SSH_KNOWN_HOSTS", str(sshd.known_hosts))
        patch.setenv("NP_SSH_CONFIG", "/dev/null")
        api.workspace_init(root / "ws")
        exp = make_project(root / "ws", "farm", run_yaml='version: "1.0"\nsteps:\n- graph_optimize: null\n')
        (root / "ws" / "devices.yaml").write_text(devices_yaml(farm.address, sshd, root / "device-work"))
        assert api.run(cwd=exp).exit_code == 0
        first = api.profile(["graph_optimize"], method="on-device", device=DEVICE, cwd=exp,
                            profile_opts={"num_executions": 5, "warmup": 1})
        assert first.exit_code == 0, to_dict(first)
        yield exp, to_dict(first)


@pytest.fixture(autouse=True)
def _private_ssh(sshd: SshServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NP_SSH_KNOWN_HOSTS", str(sshd.known_hosts))
    monkeypatch.setenv("NP_SSH_CONFIG", "/dev/null")


def state(farm: Farm) -> dict[str, Any]:
    places = farm_places(farm.address)
    return {"places": {p["name"]: p for p in places["places"]}, "reservations": places["reservations"]}


def all_free(farm: Farm) -> bool:
    now = state(farm)
    return not now["reservations"] and not any(p["acquired"] for p in now["places"].values())


def post_hoc(exp: Path) -> dict[str, dict[str, Any]]:
    return {r["measurement_id"]: r for r in json.loads((exp / "report.json").read_text())["post_hoc"]}


@pytest.mark.np_run
def test_a_round_measures_through_a_reservation_and_a_place(finished: tuple[Path, dict[str, Any]], farm: Farm,
                                                            sshd: SshServer, tmp_path: Path, run_np: Any) -> None:
    exp, first = finished
    record = first["results"][0]
    assert record["status"] == "SUCCESS", record
    where = record["provenance"]["farm"]
    assert where["place"] in PLACES and where["exporter"] == "shelf" and where["tags"] == {"np-target": "rpi5"}
    assert where["labgrid_version"].startswith("26.") and where["coordinator"] == farm.address
    assert record["timings"]["queue_wait_s"] >= 0 and where["waited_s"] >= 0
    assert f"labgrid place {where['place']}" in record["metrics"][0]["source"]
    assert record["provenance"]["transport"].startswith("ssh ") and record["result_kind"] == "measured"
    # the coordinator shows the place free again (labgrid's own client says so too), and no reservation is left
    assert all_free(farm)
    assert "acquired: None" in farm.show(where["place"])
    exp = copy_workspace(exp, tmp_path)
    table = run_np("report", cwd=exp).stdout
    assert f"@ {where['place']}" in table  # the post-hoc table's Device column names the board
    listing = run_np("devices", "ls", "--json", cwd=exp)
    assert listing.exit_code == 0, listing.stderr
    pi = next(d for d in listing.json if d["device"] == DEVICE)
    assert {p["name"]: p["state"] for p in pi["farm"]["places"]} == {p: "free" for p in PLACES}
    assert {p["board"] for p in pi["farm"]["places"]} == {f"{sshd.user}@127.0.0.1:{sshd.port}"}


@pytest.mark.np_run
def test_three_rounds_on_two_places_never_share_one(finished: tuple[Path, dict[str, Any]], farm: Farm, tmp_path: Path) -> None:
    exp = copy_workspace(finished[0], tmp_path)
    command = [sys.executable, "-m", "np_optimizer", "profile", "graph_optimize", "-d", DEVICE, "--method",
               "on-device", "--profile-opt", LONG, "--json"]
    procs = [subprocess.Popen(command, cwd=exp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outputs]
    results = [json.loads(out)["results"][0] for out, _ in outputs]
    by_place: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        window = r["extras"]["measured_window"]
        by_place.setdefault(r["provenance"]["farm"]["place"], []).append((window["start"], window["end"]))
    assert set(by_place) == set(PLACES), by_place  # both boards were used
    for windows in by_place.values():
        windows.sort()
        assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), by_place  # never two on one place
    waited = max(results, key=lambda r: r["timings"]["queue_wait_s"])
    assert waited["timings"]["queue_wait_s"] > 1.0 and waited["provenance"]["farm"]["waited_s"] > 1.0
    log = (exp / "logs" / "execution.log").read_text()
    assert "number 1 in the queue, estimated wait" in log and "in the queue; measuring now" in log
    assert all_free(farm)


@pytest.mark.np_run
def test_kill_9_while_holding_a_place_releases_it(finished: tuple[Path, dict[str, Any]], farm: Farm, tmp_path: Path) -> None:
    exp = copy_workspace(finished[0], tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "np_optimizer", "profile", "graph_optimize", "-d", DEVICE,
                             "--method", "on-device", "--profile-opt", "num_executions=1000000,timeout=60"],
                            cwd=exp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    acquired, released = farm.log_count("place acquired by"), farm.log_count("place released")
    try:
        deadline = time.monotonic() + 120
        while farm.log_count("place acquired by") == acquired:  # the coordinator prints each acquire
            assert proc.poll() is None and time.monotonic() < deadline, "np never acquired a place"
            time.sleep(0.1)
        assert any(p["acquired"] for p in state(farm)["places"].values())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        while farm.log_count("place released") == released:
            assert time.monotonic() - killed < 20, state(farm)
            time.sleep(0.1)
        released_after = time.monotonic() - killed
        while not all_free(farm):  # the reservation is cancelled right after the release
            assert time.monotonic() - killed < 20, state(farm)
    finally:
        if proc.poll() is None:
            proc.kill()
    # np's own cleanup (its labgrid agent saw its stdin end), not labgrid's: an acquired place never expires there
    assert released_after < 10, released_after
    print(f"place released {released_after:.1f} s after kill -9")


@pytest.mark.np_run
def test_unreachable_coordinator_and_dead_exporter_exit_4(finished: tuple[Path, dict[str, Any]],
                                                           sshd: SshServer, tmp_path: Path, run_np: Any) -> None:
    exp = copy_workspace(finished[0], tmp_path)
    ws = exp.parents[1]
    before = post_hoc(exp)
    assert before
    # a coordinator nobody listens on
    (ws / "devices.yaml").write_text(devices_yaml(f"127.0.0.1:{free_port()}", sshd, tmp_path / "work"))
    result = run_np("profile", "graph_optimize", "-d", DEVICE, "--method", "on-device", "--json", cwd=exp)
    assert result.exit_code == 4, result.stdout[-1500:]
    error = result.json["results"][0]["error"]
    assert error["code"] == "NP-FRM-503" and "coordinator" in error["message"] and "\n" not in error["message"]
    listing = run_np("devices", "ls", cwd=exp)
    assert listing.exit_code == 4 and "NP-FRM-503" in listing.stderr + listing.stdout, listing
    assert "Traceback" not in listing.stderr
    # an exporter that dies: its place (made with labgrid-client, as the README says) has no board behind it any more.
    # On a farm of this test's own: the module's farm, which the other tests read, keeps its one live exporter.
    service = {"address": sshd.host, "username": sshd.user, "port": sshd.port}
    with Farm.start(tmp_path / "labgrid") as own:
        dying = own.add_exporter("dying", {"rpi5-c": service})
        own.add_places({"rpi5-c": ("dying/rpi5-c/NetworkService", {"np-target": "doomed"})})
        dying.kill()
        dying.wait()
        (ws / "devices.yaml").write_text(devices_yaml(own.address, sshd, tmp_path / "work", tags="doomed"))
        result = run_np("profile", "graph_optimize", "-d", DEVICE, "--method", "on-device", "--json", cwd=exp)
        assert result.exit_code == 4, result.stdout[-1500:]
        error = result.json["results"][0]["error"]
        assert error["code"] == "NP-FRM-502" and "rpi5-c" in error["message"], error
        assert all_free(own)  # the failed round gave the place back too
    # nothing written before is lost: the earlier rounds are still there unchanged, the two failed ones were added
    after = post_hoc(exp)
    assert {k: after[k] for k in before} == before
    assert sorted(r["error"]["code"] for k, r in after.items() if k not in before) == ["NP-FRM-502", "NP-FRM-503"]


@pytest.mark.parametrize("text, needle", [
    ("devices:\n  raspberry_pi_5:\n    labgrid: {tags: {np-target: rpi5}}\n", "no `farm:` section"),
    ("farm:\n  coordinator: nowhere\ndevices:\n  raspberry_pi_5:\n    labgrid: {tags: {np-target: rpi5}}\n",
     "farm.coordinator must be host:port"),
    ("farm:\n  coordinator: 127.0.0.1:20408\ndevices:\n  raspberry_pi_5:\n    ssh: pi@127.0.0.1\n"
     "    labgrid: {tags: {np-target: rpi5}}\n", "both ssh and labgrid"),
    ("farm:\n  coordinator: 127.0.0.1:20408\ndevices:\n  raspberry_pi_5:\n    labgrid: {tags: {Bad Tag: x}}\n",
     "is not a labgrid tag"),
    ("farm:\n  coordinator: 127.0.0.1:20408\ndevices:\n  raspberry_pi_5:\n    labgrid: {tags: {}}\n",
     "at least one tag"),
])
def test_devices_yaml_farm_entries_are_validated(tmp_path: Path, text: str, needle: str) -> None:
    from np_optimizer.errors import ConfigError
    from np_optimizer.workspace.remote import load_remote_devices

    path = tmp_path / "devices.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_remote_devices(path)
    assert needle in caught.value.message and str(path) in caught.value.message
    assert caught.value.hint and caught.value.code == "NP-DEV-400" and caught.value.exit_code == 3


def test_each_device_kind_gets_its_queue(tmp_path: Path) -> None:
    from np_optimizer.profiler.measure.queues import queue_for, registered_queues
    from np_optimizer.workspace.remote import load_remote_devices

    path = tmp_path / "devices.yaml"
    path.write_text("farm:\n  coordinator: 127.0.0.1:20408\ndevices:\n  raspberry_pi_5:\n"
                    "    labgrid: {tags: {np-target: rpi5}, priority: 5}\n  graviton:\n    ssh: me@127.0.0.1\n")
    remotes = load_remote_devices(path)
    farm = remotes["raspberry_pi_5"].farm
    assert farm is not None and farm.tag_dict == {"np-target": "rpi5"} and farm.priority == 5
    assert farm.coordinator == "127.0.0.1:20408" and remotes["graviton"].farm is None
    assert set(registered_queues()) == {"labgrid", "local"}
    assert queue_for(remotes["raspberry_pi_5"]).name == "labgrid"
    assert queue_for(remotes["graviton"]).name == queue_for(None).name == "local"
