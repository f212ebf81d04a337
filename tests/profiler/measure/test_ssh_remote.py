"""The on-device method over SSH, for real: a private sshd on loopback (tests/sshd_fixture.py), a key made by the
test, and this venv's Python as the device's Python. Each failure (closed port, wrong key, a Python without
ExecuTorch, a missing Python, a changed host key) must give one clear error with its own code.

sshd comes from Debian's openssh-server, which `make test` installs when missing. Without it these tests fail (they
do not skip) unless NP_SKIP_SSH_TESTS=1 is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from np_optimizer.errors import NpError, error_record
from np_optimizer.profiler.methods import get_method
from np_optimizer.profiler.request import MethodOutput
from np_optimizer.workspace.remote import RemoteDevice
from tests.helpers import MlpModels, raw_document, request_for
from tests.sshd_fixture import INSTALL_COMMAND, SshServer, free_port, sshd_available

DEVICE = "raspberry_pi_5"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if not sshd_available():
        if os.environ.get("NP_SKIP_SSH_TESTS") == "1":
            pytest.skip("sshd is not installed and NP_SKIP_SSH_TESTS=1")
        pytest.fail(f"The SSH tests need sshd (openssh-server), which is not installed. Install it: {INSTALL_COMMAND} "
                    "(`make test` does this), or set NP_SKIP_SSH_TESTS=1 to skip these tests.", pytrace=False)
    server = SshServer.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _private_ssh_and_cache(sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # never touch ~/.ssh: the server's throw-away host key goes to its own known_hosts file
    monkeypatch.setenv("NP_SSH_KNOWN_HOSTS", str(sshd.known_hosts))
    monkeypatch.setenv("NP_SSH_CONFIG", "/dev/null")
    monkeypatch.setenv("NP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NP_QUEUE_DIR", str(tmp_path / "queue"))


def remote(sshd: SshServer, tmp_path: Path, *, python: str = sys.executable, port: int | None = None,
           key: Path | None = None) -> RemoteDevice:
    return RemoteDevice(device=DEVICE, destination=f"{sshd.user}@{sshd.host}", port=port or sshd.port, python=python,
                        identity_file=str(key or sshd.client_key), work_dir=str(tmp_path / "device-work"),
                        connect_timeout=5)


def profile_remote(models: MlpModels, tmp_path: Path, device: RemoteDevice,
                   options: dict[str, int] | None = None) -> MethodOutput | dict[str, Any]:
    """The method's output, or the error record a failed round stores (built from the np error it raised)."""
    request = request_for(models, tmp_path / "job", options or {"num_executions": 3, "warmup": 1}, device=DEVICE,
                          remote=device)
    try:
        return get_method("on-device").profile(request)
    except NpError as exc:
        return error_record(exc)


def assert_one_clear_error(output: MethodOutput | dict[str, Any], code: str) -> dict[str, Any]:
    assert isinstance(output, dict), output
    assert output["code"] == code, output
    for text in (output["message"], output["hint"]):
        assert text and "\n" not in text
    return output


@pytest.mark.heavy
def test_measurement_over_ssh(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    device = remote(sshd, tmp_path)
    request = request_for(models, tmp_path / "job", {"num_executions": 8, "warmup": 2, "timeout": 60},
                          device=DEVICE, remote=device)
    output = get_method("on-device").profile(request)
    assert not output.partial
    doc = raw_document(request, output)
    assert len(doc["samples_ms"]) == 8 and len(doc["warmup_ms"]) == 2
    assert doc["remote"]["port"] == sshd.port and doc["remote"]["exit_code"] == 0
    assert doc["model"]["size_bytes"] == (models.compiled_dir / "model.pte").stat().st_size
    assert output.provenance["transport"] == f"ssh {sshd.user}@127.0.0.1:{sshd.port}"
    assert output.provenance["runs_done"] == 8 and output.provenance["python"]
    assert {m.metric_type for m in output.metrics} == {"LATENCY", "MEMORY", "MODEL_WEIGHT_MEMORY", "MACS", "PARAMS"}
    assert f"measured on {DEVICE}" in output.metrics[0].source
    # the remote runtime has the event tracer: the traced pass came home in the document and gave layer rows
    assert output.artifacts["layers"] and output.extras["layer_times"]["traced_runs"] > 0
    # the files went to a fresh folder under the device's work_dir, removed afterwards
    work = Path(device.work_dir)
    assert work.is_dir() and list(work.iterdir()) == []
    assert Path(doc["model"]["path"]).parent.parent == work


def test_closed_port_is_unreachable(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    error = assert_one_clear_error(profile_remote(models, tmp_path, remote(sshd, tmp_path, port=free_port())),
                                   "NP-DEV-503")
    assert "unreachable" in error["message"] and "connection refused" in error["message"]


def test_wrong_key_is_an_authentication_failure(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    error = assert_one_clear_error(profile_remote(models, tmp_path, remote(sshd, tmp_path, key=sshd.wrong_key)),
                                   "NP-DEV-401")
    assert "Permission denied" in error["message"] and "identity_file" in error["hint"]


def _python_without_executorch(tmp_path: Path) -> str:
    """/usr/bin/python3 when it lacks torch (Debian's does), else a bare venv."""
    system = "/usr/bin/python3"
    if os.path.exists(system) and subprocess.run([system, "-c", "import torch"], capture_output=True).returncode:
        return system
    venv.create(tmp_path / "bare-venv", with_pip=False)
    return str(tmp_path / "bare-venv" / "bin" / "python")


def test_remote_python_without_executorch(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    python = _python_without_executorch(tmp_path)
    output = profile_remote(models, tmp_path, remote(sshd, tmp_path, python=python))
    error = assert_one_clear_error(output, "NP-DEV-424")
    assert python in error["message"] and "ExecuTorch" in error["message"] and "python:" in error["hint"]
    assert error["kind"] == "runtime_missing"


OLD_RUNTIME = Path(__file__).resolve().parents[3] / ".venv" / "old-executorch"


def test_a_remote_runtime_without_the_tracer_says_so_once(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    """The device's ExecuTorch is 1.4.1 (its real pybindings, built without the event tracer): the round measures as
    before and says once, with both versions, why it has no per-layer times; no layer row is made up."""
    if not (OLD_RUNTIME / "executorch" / "version.py").is_file():  # `make venv` unpacks it; pytest alone does too
        subprocess.run([sys.executable, str(OLD_RUNTIME.parents[1] / "scripts" / "old_runtime.py"), str(OLD_RUNTIME)],
                       check=True)
    python = tmp_path / "python-et141"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={OLD_RUNTIME} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    request = request_for(models, tmp_path / "job", {"num_executions": 4, "warmup": 1, "timeout": 60},
                          device=DEVICE, remote=remote(sshd, tmp_path, python=str(python)))
    output = get_method("on-device").profile(request)
    assert raw_document(request, output)["runtime"]["executorch_version"].startswith("1.4.1")
    assert [m.metric_type for m in output.metrics][0] == "LATENCY" and not output.partial
    assert "layers" not in output.artifacts and "trace" not in output.artifacts
    said = [w for w in output.warnings if "per-layer times" in w]
    assert len(said) == 1 and "1.4.1" in said[0] and "1.5.1" in said[0] and "event tracer" in said[0]
    assert output.extras["layer_times_unavailable"] == said[0]


def test_remote_python_that_does_not_exist(sshd: SshServer, models: MlpModels, tmp_path: Path) -> None:
    output = profile_remote(models, tmp_path, remote(sshd, tmp_path, python="/nonexistent/bin/python3"))
    assert "/nonexistent/bin/python3" in assert_one_clear_error(output, "NP-DEV-426")["message"]


def test_changed_host_key_is_refused(sshd: SshServer, models: MlpModels, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    other = Path(f"{sshd.wrong_key}.pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[{sshd.host}]:{sshd.port} {other[0]} {other[1]}\n")
    monkeypatch.setenv("NP_SSH_KNOWN_HOSTS", str(known))
    assert_one_clear_error(profile_remote(models, tmp_path, remote(sshd, tmp_path)), "NP-DEV-495")
