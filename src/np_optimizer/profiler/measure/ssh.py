"""Measure a .pte on a remote device over SSH, with the system `ssh` client (no paramiko).

One SSH connection per measurement: a tar stream holding the measuring script (the zipapp measure_pte.pyz, the same
file local runs use) and the .pte goes to the stdin of `<remote python> -c BOOTSTRAP`, after a line with its length;
the bootstrap, run by that same Python, unpacks it into a fresh folder under the device's work_dir, runs the script,
removes the folder and exits with the script's code. So the device needs only sh and a Python with torch and the
ExecuTorch runtime: no scp, sftp server, tar or mktemp.

np keeps the connection's stdin open after the payload until the measurement ends. Its end (EOF) on the device means
np or the connection is gone (np killed, even with kill -9, closes its end; ssh forwards that; a dropped connection
closes it too): the bootstrap then stops the script (SIGTERM; its supervisor kills its worker) and removes the folder,
so nothing keeps measuring on a device that the queue has given to the next measurement.

ssh runs with BatchMode=yes (never prompts), ConnectTimeout, StrictHostKeyChecking=accept-new, ServerAlive probes
and LogLevel=ERROR (hides "Permanently added ..." but keeps "Permission denied"). $NP_SSH_KNOWN_HOSTS and
$NP_SSH_CONFIG, when set, choose the known_hosts file and the ssh config file (tests and CI use them so they never
touch ~/.ssh).

Failures become MeasureError or DeviceUnreachableError with one code each: NP-DEV-503 unreachable, NP-DEV-401
authentication, NP-DEV-495 host key, NP-DEV-426 remote Python not found, NP-DEV-424 remote Python without the
runtime, NP-DEV-504 no answer in time, NP-DEV-502 other ssh or protocol failures, and the script's own errors
(NP-RUN-*).
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from np_optimizer.errors import DeviceUnreachableError, MeasureError
from np_optimizer.profiler.measure import (
    ARCHIVE_NAME,
    Measurement,
    MeasureOptions,
    failure_from_doc,
    measure_failure,
    parse_document,
    script_archive,
    script_args,
)

if TYPE_CHECKING:
    from np_optimizer.workspace.remote import RemoteDevice

__all__ = ["SshTarget", "target_for", "measure_remote", "classify_ssh_failure", "BOOTSTRAP"]

# Runs on the device under the remote Python (any Python 3). argv: work_dir, then the script's arguments with
# @DIR@ standing for the unpacked folder.
BOOTSTRAP = r"""
import os, shutil, subprocess, sys, tarfile, tempfile, threading, time
class Payload(object):
    # the tar stream: the first N bytes of stdin, N on the line before them (stdin stays open after them)
    def __init__(self):
        head = b""
        while not head.endswith(b"\n"):
            c = os.read(0, 1)
            if not c or len(head) > 20:
                raise EOFError("no payload")
            head += c
        self.left = int(head)
    def read(self, n=-1):
        n = self.left if n is None or n < 0 else min(n, self.left)
        out = os.read(0, n) if n > 0 else b""
        if n > 0 and not out:
            raise EOFError("the payload ended early")
        self.left -= len(out)
        return out
def stop_when_np_is_gone(p):
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    if p.poll() is None:  # np or the connection is gone: stop the script (its supervisor kills its worker)
        p.terminate()
        for _ in range(200):
            if p.poll() is not None:
                return
            time.sleep(0.1)
        p.kill()
base = os.path.expanduser(sys.argv[1])
try:
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="np-measure-", dir=base)
except OSError as e:
    sys.stderr.write("np bootstrap: cannot use work_dir %s (%s); using the temp dir\n" % (base, e))
    d = tempfile.mkdtemp(prefix="np-measure-")
rc = 90
try:
    t = tarfile.open(fileobj=Payload(), mode="r|")
    try:
        t.extractall(d, filter="data")
    except TypeError:
        t.extractall(d)
    args = [a.replace("@DIR@", d) for a in sys.argv[2:]]
    sys.stdout.flush()
    p = subprocess.Popen([sys.executable, os.path.join(d, "measure_pte.pyz")] + args, stdin=subprocess.DEVNULL)
    w = threading.Thread(target=stop_when_np_is_gone, args=(p,))
    w.daemon = True
    w.start()
    rc = p.wait()
except Exception as e:
    sys.stderr.write("np bootstrap failed: %s: %s\n" % (type(e).__name__, e))
finally:
    shutil.rmtree(d, ignore_errors=True)
sys.exit(rc)
"""
_BOOTSTRAP_FAILED = 90


@dataclass(frozen=True)
class SshTarget:
    host: str
    user: str | None = None
    port: int = 22
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None  # "/dev/null" ignores ~/.ssh/config
    connect_timeout: int = 10
    strict_host_key_checking: str = "accept-new"
    settings: str | None = None  # where the address and port come from (a devices.yaml, a farm place)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def transport(self) -> str:
        return f"ssh {self.destination}:{self.port}"

    def ssh_command(self, remote_command: str) -> list[str]:
        cmd = ["ssh"]
        if self.ssh_config:
            cmd += ["-F", self.ssh_config]
        cmd += ["-p", str(self.port)]  # ssh uses the first -p it sees: give it once
        if self.identity_file:
            cmd += ["-i", os.path.expanduser(self.identity_file), "-o", "IdentitiesOnly=yes"]
        cmd += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(self.connect_timeout)}",
                "-o", f"StrictHostKeyChecking={self.strict_host_key_checking}",
                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4", "-o", "LogLevel=ERROR"]
        if self.known_hosts:
            cmd += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return cmd + ["-T", "--", self.destination, remote_command]


def target_for(remote: RemoteDevice) -> SshTarget:
    """The SSH target of a device entry of devices.yaml."""
    user, _, host = remote.destination.rpartition("@")
    return SshTarget(host=host, user=user or None, port=remote.port, identity_file=remote.identity_file,
                     known_hosts=remote.known_hosts or os.environ.get("NP_SSH_KNOWN_HOSTS") or None,
                     ssh_config=os.environ.get("NP_SSH_CONFIG") or None, connect_timeout=remote.connect_timeout,
                     settings=(f"the labgrid place acquired for {remote.device} (its NetworkService)" if remote.farm
                               else f"`ssh:` and `port:` of {remote.device} in {remote.source or 'devices.yaml'}"))


_UNREACHABLE = (
    (r"Connection refused", "connection refused"),
    (r"No route to host", "no route to host"),
    (r"Network is unreachable", "network unreachable"),
    (r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution|"
     r"nodename nor servname provided", "DNS lookup failed"),
    (r"Connection timed out|Operation timed out|timed out during banner exchange", "connection timed out"),
    (r"kex_exchange_identification|Connection closed by .* port|Connection reset by peer",
     "connection closed by the remote side before login"),
)
_AUTH = r"Permission denied \(|Too many authentication failures|Authentication failed|no mutual signature"
_HOSTKEY = r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key for .* has changed"


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def classify_ssh_failure(returncode: int, stderr: str, where: str, target: SshTarget | None = None
                         ) -> MeasureError | DeviceUnreachableError | None:
    """ssh's exit 255 as one typed failure (from ssh's own message); None for any other exit code. With `target`,
    the hint of an unreachable device names the address, the port and the file that sets them."""
    if returncode != 255:
        return None
    tail = stderr.strip().splitlines()[-10:]
    last = _last(stderr)
    if re.search(_HOSTKEY, stderr):
        return measure_failure("NP-DEV-495", f"The host key of {where} could not be verified: {last}",
                              "If the device was reinstalled, remove its old entry with `ssh-keygen -R <host>`; "
                              "otherwise check you reach the right machine.", kind="host_key", stderr_tail=tail)
    if re.search(_AUTH, stderr):
        return measure_failure("NP-DEV-401", f"Authentication to {where} failed (key refused): {last}",
                              "Check `identity_file` in devices.yaml and that its public key is in the device's "
                              "~/.ssh/authorized_keys (np never prompts for a password).", kind="auth_failed",
                              stderr_tail=tail)
    for pattern, what in _UNREACHABLE:
        if re.search(pattern, stderr):
            hint = ("Check the address and port (`ssh` and `port` in devices.yaml), that the device is on and on "
                    "this network, and that sshd runs there.")
            if target is not None:
                hint = (f"Check the address {target.destination} and port {target.port} (set by "
                        f"{target.settings or 'devices.yaml'}), that the device is on and on this network, and that "
                        f"sshd runs there: `ssh -p {target.port} {target.destination}` must connect.")
            return measure_failure("NP-DEV-503", f"Device {where} is unreachable: {what} ({last})", hint,
                                  kind="unreachable", stderr_tail=tail)
    return measure_failure("NP-DEV-502", f"ssh to {where} failed: {last or 'exit 255'}",
                          "Try `ssh` to the device by hand with the same settings.", kind="ssh_error", stderr_tail=tail)


def _tar(files: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in files.items():
            archive.add(str(path), arcname=name)
    return buffer.getvalue()


def _write_all(fd: int, data: bytes) -> None:
    """Write `data` to the pipe `fd`; stops quietly when the reader is gone (ssh ended: its exit says why)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


def _run_ssh(command: list[str], payload: bytes, timeout: float) -> tuple[int, bytes, bytes]:
    """Run ssh with `payload` (after a line giving its length) on its stdin, which stays open until ssh ends: its
    close is what tells the device that np is gone. Returns (exit code, stdout, stderr); raises
    subprocess.TimeoutExpired (ssh killed) after `timeout` s."""
    read_end, write_end = os.pipe()  # not inherited by other children (PEP 446): only np holds the write end
    try:
        proc = subprocess.Popen(command, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    feeder = threading.Thread(target=_write_all, args=(write_end, b"%d\n" % len(payload) + payload), daemon=True)
    feeder.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # stop ssh (its end of the pipe closes, so the feeder stops too)
        proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(command, timeout, output=out, stderr=err) from exc
    except BaseException:  # Ctrl+C
        proc.kill()
        proc.wait()
        raise
    finally:
        feeder.join(timeout=5)
        os.close(write_end)
    return proc.returncode, out, err


def measure_remote(target: SshTarget, pte: Path, options: MeasureOptions, *, python: str = "python3",
                   work_dir: str = "/tmp/np-measure", device: str | None = None) -> Measurement:
    """Run the measuring script on `target` with `python`; returns the document with a "remote" section added, or
    raises MeasureError or DeviceUnreachableError. A timeout that expires on the device is not a failure: the document
    says partial."""
    where = f"{device} ({target.destination}:{target.port})" if device else f"{target.destination}:{target.port}"
    payload = _tar({ARCHIVE_NAME: script_archive(), "model.pte": Path(pte)})
    args = ["@DIR@/model.pte", *script_args(options)]
    remote_cmd = " ".join([shlex.quote(python), "-c", shlex.quote(BOOTSTRAP), shlex.quote(work_dir),
                           *(shlex.quote(a) for a in args)])
    # connect, imports and load (not counted in the measurement timeout), the timeout, the kill grace, a margin
    guard = 2 * target.connect_timeout + options.load_timeout_s + options.timeout_s + options.kill_grace_s + 60
    start = time.monotonic()
    try:
        returncode, stdout, stderr = _run_ssh(target.ssh_command(remote_cmd), payload, guard)
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace")
        raise measure_failure("NP-DEV-504", f"No answer from {where} within {guard:g} s.",
                             "The device or the network stalled; try again, or check the device's load.",
                             kind="timeout", stderr_tail=err.splitlines()[-10:]) from exc
    except FileNotFoundError as exc:
        raise measure_failure("NP-DEV-502", "The `ssh` client is not installed on this machine.",
                             "Install it (Debian: apt-get install openssh-client).", kind="ssh_error") from exc
    wall = time.monotonic() - start
    out = stdout.decode("utf-8", "replace")
    err = stderr.decode("utf-8", "replace")
    tail = [ln for ln in err.splitlines() if ln.strip()][-40:]
    failure = classify_ssh_failure(returncode, err, where, target)
    if failure is not None:
        raise failure
    doc = parse_document(out)
    if doc is None:
        if returncode in (126, 127):
            raise measure_failure("NP-DEV-426", f"Python {python} was not found on {where}: {_last(err)}",
                                 "Set `python:` for the device in devices.yaml to the path of a Python with the "
                                 "ExecuTorch runtime.", kind="python_not_found", stderr_tail=tail)
        reason = _last(err) or out[-200:] or f"exit code {returncode}"
        what = "could not unpack the files" if returncode == _BOOTSTRAP_FAILED else "printed no result"
        raise measure_failure("NP-DEV-502", f"The measurement on {where} {what}: {reason}",
                             "Check the remote Python (3.8 or newer) and free space in its work_dir.",
                             kind="protocol", stderr_tail=tail)
    doc["remote"] = {"host": target.host, "user": target.user, "port": target.port, "python": python,
                     "work_dir": work_dir, "ssh_wall_s": wall, "uploaded_bytes": len(payload),
                     "exit_code": returncode}
    if not doc.get("ok"):
        raise failure_from_doc(doc, where=where, python=python, pte_name=Path(pte).name, stderr_tail=tail)
    return Measurement(doc=doc, transport=target.transport, wall_s=wall, python=python, stderr_tail=tail)
