"""The schema-registry stand-in (``framework.decoders.registry_server``) in a process of its own, for
``converge stack`` (the tests start it in-process: ``RegistryStandIn``).

``with LocalRegistry(log_dir) as registry:`` starts it on a free loopback port and stops it on exit;
``registry.url`` is its URL. It is a stand-in, not a schema registry: schemas live in its memory
only (a stopped stand-in has forgotten them) and it serves only the REST subset converge's
decoders and the usual serializers use.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.local_process import die_with_parent, free_port, port_free, stop_pid

__all__ = ["LocalRegistry", "LocalRegistryError"]


class LocalRegistryError(ConvergeError, RuntimeError):
    """The registry stand-in could not be started."""


class LocalRegistry:
    """One registry stand-in process on 127.0.0.1:``port`` (a free one when None), logging to
    ``log_dir/registry-stand-in.log``; ``detach=True`` lets it outlive this process."""

    host = "127.0.0.1"

    def __init__(
        self,
        log_dir: str | Path,
        *,
        port: int | None = None,
        startup_timeout: float = 30.0,
        detach: bool = False,
    ) -> None:
        self.log_path = Path(log_dir) / "registry-stand-in.log"
        self.port = port
        self.startup_timeout = startup_timeout
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> str:
        """Start the stand-in and wait until it answers; returns its URL."""
        if self._proc is not None:
            raise LocalRegistryError("the registry stand-in is already started")
        if self.port is not None and not port_free(self.host, self.port):
            raise LocalRegistryError(f"cannot bind the registry port {self.host}:{self.port}: in use")
        self.port = self.port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "framework.decoders.registry_server", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=os.setsid if self.detach else die_with_parent, close_fds=True,  # noqa: PLW1509
            )  # fmt: skip
        if not self.detach:
            atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise LocalRegistryError(
                    f"the registry stand-in exited with code {code} while starting:\n{tail}"
                )
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=2):  # noqa: S310 - loopback
                    return
            except (urllib.error.URLError, OSError) as exc:
                last = repr(exc)
            time.sleep(0.1)
        raise LocalRegistryError(
            f"the registry stand-in did not answer within {self.startup_timeout}s: {last}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the stand-in (its schemas are lost)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_pid(proc.pid, timeout, wait=proc.wait)

    def __enter__(self) -> LocalRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
