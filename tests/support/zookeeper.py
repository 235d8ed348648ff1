"""A real ZooKeeper server from Debian's ``zookeeper`` package, for tests.

The server runs standalone on a free 127.0.0.1 port with its own config and
data dir, the admin server off and the four-letter-word commands cut to the
one ZooKeeper 3.8 always keeps (``srvr``, hard-wired).
It is started the way Debian's packaging starts it (``QuorumPeerMain`` with
the classpath from ``/etc/zookeeper/conf/environment``), in its own process
group, receives SIGKILL from the kernel if the test process dies, and is
stopped (SIGTERM, then SIGKILL) by ``stop`` or at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from framework.local_stack import free_port

__all__ = ["ZooKeeperServer", "zookeeper_classpath", "zookeeper_server"]

_ENVIRONMENT = Path("/etc/zookeeper/conf/environment")
_DEFAULT_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_PR_SET_PDEATHSIG = 1


def zookeeper_classpath() -> str | None:
    """The server classpath of the installed Debian package, or None when it is not installed."""
    if not Path("/usr/share/java/zookeeper.jar").exists() or shutil.which("java") is None:
        return None
    if _ENVIRONMENT.exists():
        m = re.search(r'^CLASSPATH="?([^"\n]+)"?', _ENVIRONMENT.read_text(), re.MULTILINE)
        if m:
            return m.group(1)
    return _DEFAULT_CLASSPATH


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ZooKeeperServer:
    """One standalone ZooKeeper process on 127.0.0.1."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        data = self.base_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join([
                "tickTime=500",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={data}",
                f"clientPort={self.port}",
                "clientPortAddress=127.0.0.1",
                "admin.enableServer=false",
                "4lw.commands.whitelist=",
                "maxClientCnxns=100",
                "",
            ])
        )  # fmt: skip
        return cfg

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        classpath = zookeeper_classpath()
        if classpath is None:
            raise RuntimeError("ZooKeeper is not installed: run scripts/system_deps.sh as root")
        self.port = free_port()
        cfg = self._write_config()
        log = open(self.base_dir / "zookeeper.log", "ab")  # noqa: SIM115 - owned by the child
        cmd = [
            "java", "-Xmx128m", "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=",
            f"-Dzookeeper.log.dir={self.base_dir}",
            "-cp", classpath, _MAIN, str(cfg),
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent
        )
        log.close()
        atexit.register(self.stop)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = (self.base_dir / "zookeeper.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ZooKeeper exited with {self._proc.returncode}:\n{tail}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
            except OSError:
                time.sleep(0.1)
                continue
            client = KazooClient(hosts=self.hosts, timeout=5.0)
            try:
                client.start(timeout=2.0)
                client.get_children("/")
                return
            except KazooTimeoutError:
                continue
            finally:
                client.stop()
                client.close()
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on {self.hosts} within {timeout}s")

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper for the whole session, stopped at its end."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()
