"""The embedded S3 server: moto's server mode in a process of its own, for the tests and the demo.

``with LocalS3() as s3:`` starts ``moto.server`` on a free loopback port and stops it on exit;
``s3.endpoint`` is its URL. It keeps its objects in memory: a stopped server has lost them
(``stop`` then ``start`` again is an outage that empties the bucket). It accepts any credentials.
"""

from __future__ import annotations

import atexit
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.core.extras import needs_extra
from framework.local_stack import _stop_pid, die_with_parent, free_port

__all__ = ["LocalS3", "LocalS3Error"]


class LocalS3Error(ConvergeError, RuntimeError):
    """The embedded S3 server could not be started."""


class LocalS3:
    """One ``moto.server`` process on ``host``, on ``port`` (a free one when None)."""

    def __init__(
        self, log_dir: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
        startup_timeout: float = 30.0,
    ) -> None:  # fmt: skip
        self.log_path = Path(log_dir) / "moto-server.log"
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL (``http://host:port``)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        """Start the server and wait until it answers; returns its endpoint."""
        if self._proc is not None:
            raise LocalS3Error("the embedded S3 server is already started")
        with needs_extra("the embedded S3 server"):
            import moto.server  # noqa: F401 - only to name the extra when moto is missing
        self.port = self.port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent, close_fds=True,  # noqa: PLW1509
            )  # fmt: skip
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.endpoint

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise LocalS3Error(f"moto.server exited with code {code} while starting:\n{tail}")
            try:
                with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2):  # noqa: S310 - loopback
                    return
            except (urllib.error.URLError, OSError) as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise LocalS3Error(f"moto.server did not answer within {self.startup_timeout}s: {last}")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (its objects are lost); the port stays this object's for a later ``start``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        _stop_pid(proc.pid, timeout, wait=proc.wait)

    def __enter__(self) -> LocalS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
