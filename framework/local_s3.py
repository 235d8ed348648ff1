"""The embedded S3 server: moto's server mode in a process of its own, for the tests, the demo
and ``converge stack``.

``with LocalS3(log_dir) as s3:`` starts ``moto.server`` on a free loopback port and stops it on
exit; ``s3.endpoint`` is its URL. It keeps its objects in memory: a stopped server has lost
them (``stop`` then ``start`` again is an outage that empties the bucket). It accepts any
credentials; ``dlq_env`` gives a worker the settings that park into its bucket.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.core.extras import needs_extra
from framework.local_process import die_with_parent, free_port, port_free, stop_pid
from framework.settings import ENV
from stores.objects.store import ObjectStore

__all__ = ["LocalS3", "LocalS3Error", "DLQ_BUCKET", "ACCESS_KEY", "available", "dlq_env"]

#: The bucket ``converge stack`` and the demo create for parked segments.
DLQ_BUCKET = "converge-dlq"
#: The access key and secret key given to the embedded server (it accepts any).
ACCESS_KEY = "test"


class LocalS3Error(ConvergeError, RuntimeError):
    """The embedded S3 server could not be started."""


def available() -> bool:
    """Whether moto (the ``stack`` extra) is installed, so a ``LocalS3`` can start."""
    return importlib.util.find_spec("moto") is not None


def dlq_env(endpoint: str, prefix: str = "", bucket: str = DLQ_BUCKET) -> dict[str, str]:
    """The ``CONVERGE_DLQ_*`` variables that upload a worker's sealed segments to
    ``s3://bucket/prefix`` on the embedded server at ``endpoint``."""
    url = f"s3://{bucket}/{prefix.strip('/')}" if prefix.strip("/") else f"s3://{bucket}"
    return {
        ENV["dlq_objects"]: url,
        ENV["dlq_s3_endpoint"]: endpoint,
        ENV["dlq_s3_access_key"]: ACCESS_KEY,
        ENV["dlq_s3_secret_key"]: ACCESS_KEY,
    }


class LocalS3:
    """One ``moto.server`` process on ``host``, on ``port`` (a free one when None), logging to
    ``log_dir/moto-server.log``.

    By default the server is this process's: it is stopped at interpreter exit and receives
    SIGINT from the kernel if this process dies. ``detach=True`` lets it outlive this process
    (``converge stack up``); whoever recorded its ``pid`` stops it.
    """

    def __init__(
        self, log_dir: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
        startup_timeout: float = 30.0, detach: bool = False,
    ) -> None:  # fmt: skip
        self.log_path = Path(log_dir) / "moto-server.log"
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL (``http://host:port``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs from this object, else None."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> str:
        """Start the server and wait until it answers; returns its endpoint."""
        if self._proc is not None:
            raise LocalS3Error("the embedded S3 server is already started")
        with needs_extra("the embedded S3 server"):
            import moto.server  # noqa: F401 - only to name the extra when moto is missing
        if self.port is not None and not port_free(self.host, self.port):
            raise LocalS3Error(f"cannot bind the S3 port {self.host}:{self.port}: in use")
        self.port = self.port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
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

    def ensure_bucket(self, bucket: str = DLQ_BUCKET) -> None:
        """Create ``bucket`` on the server unless it exists."""
        store = ObjectStore(
            f"s3://{bucket}", endpoint=self.endpoint, access_key=ACCESS_KEY, secret_key=ACCESS_KEY
        )
        try:
            store.ensure_bucket()
        finally:
            store.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (its objects are lost); the port stays this object's for a later ``start``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_pid(proc.pid, timeout, wait=proc.wait)

    def __enter__(self) -> LocalS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
