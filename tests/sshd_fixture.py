"""A private sshd on a loopback port, for tests. The system's ssh configuration is never changed.

    with SshServer.start(root) as srv:
        srv.host, srv.port, srv.user, srv.client_key, srv.wrong_key, srv.known_hosts

Everything lives in `root`: sshd_config, a throw-away host key, a client key pair and a wrong key made with ssh-keygen,
authorized_keys, the log (`srv.log_text()`). sshd runs in the foreground (-D -e) as a child of the test process and
is stopped by its pid.

As root in a container, sshd refuses to start without its privilege separation directory /run/sshd (the path is
compiled in). Rather than touching the host's /run, sshd is started in a private mount namespace (`unshare --mount
--propagation private`) where /run is overlaid (or covered by a tmpfs) and /run/sshd made there; `exec` keeps the
Popen pid, so stop() signals sshd itself. UsePAM is off (key auth needs no PAM session); StrictModes is off, because
with it sshd refuses a key under /tmp (world-writable) and the client only sees "Permission denied (publickey)".
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
INSTALL_COMMAND = "apt-get update && apt-get install -y openssh-server openssh-client"


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") is not None and shutil.which("ssh-keygen") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path, comment: str = "np-test") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return path


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class SshServer:
    def __init__(self, root: Path, port: int, proc: subprocess.Popen[bytes], client_key: Path, wrong_key: Path,
                 known_hosts: Path, mode: str) -> None:
        self.root = root
        self.host = "127.0.0.1"
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = proc
        self.user = getpass.getuser()
        self.client_key = client_key
        self.wrong_key = wrong_key
        self.known_hosts = known_hosts
        self.mode = mode  # how /run/sshd was provided

    @classmethod
    def start(cls, root: Path, timeout: float = 10.0) -> SshServer:
        if not sshd_available():
            raise RuntimeError(f"sshd/ssh not found; install them: {INSTALL_COMMAND}")
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        port = free_port()
        host_key = keygen(root / "ssh_host_ed25519_key", "np-test-host")
        client_key = keygen(root / "client_key")
        wrong_key = keygen(root / "wrong_key")
        authorized = root / "authorized_keys"
        authorized.write_text(Path(f"{client_key}.pub").read_text())
        authorized.chmod(0o600)
        config = root / "sshd_config"
        config.write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {root / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}", "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "PermitRootLogin prohibit-password", "StrictModes no",
            "PrintMotd no", "LogLevel VERBOSE", "",
        ]))
        cmd = [SSHD, "-D", "-e", "-f", str(config)]
        mode = "direct"
        if not os.path.isdir("/run/sshd"):
            if os.geteuid() != 0 or not shutil.which("unshare") or not _unshare_works():
                raise RuntimeError("sshd needs /run/sshd, and this process cannot make a private mount namespace "
                                   "(needs root and unshare); create it with `mkdir -m 755 /run/sshd`")
            upper, work = root / "run-upper", root / "run-work"
            upper.mkdir()
            work.mkdir()
            script = (f"(mount -t overlay overlay -o lowerdir=/run,upperdir={upper},workdir={work} /run "
                      f"|| mount -t tmpfs -o mode=755 tmpfs /run) && mkdir -p /run/sshd && chmod 755 /run/sshd && "
                      f"exec {' '.join(cmd)}")
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
            mode = "private mount namespace (unshare), /run overlaid"
        with open(root / "sshd.log", "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        known_hosts = root / "known_hosts"
        known_hosts.touch()
        server = cls(root, port, proc, client_key, wrong_key, known_hosts, mode)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {proc.returncode}: {server.log_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return server
            except OSError as exc:
                if time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError(f"sshd did not listen on port {port} within {timeout:g} s: "
                                       f"{server.log_text()}") from exc
                time.sleep(0.05)

    def log_text(self) -> str:
        try:
            return (self.root / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> SshServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
