"""The embedded S3 server: moto's server mode in a process of its own, for the tests, the demo
and ``converge stack``.

``with LocalS3(log_dir) as s3:`` starts ``moto.server`` on a free loopback port and stops it on
exit; ``s3.endpoint`` is its URL. It keeps its objects in memory: a stopped server has lost
them (``stop`` then ``start`` again is an outage that empties the bucket). It accepts any
credentials; ``dlq_env`` gives a worker the settings that park into its bucket.
"""

from __future__ import annotations

import importlib.util
import sys

from framework.core.errors import ConvergeError
from framework.core.extras import needs_extra
from framework.local_process import LocalServer
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


class LocalS3(LocalServer):
    """One ``moto.server`` process (``LocalServer``), logging to ``log_dir/moto-server.log``."""

    what, log_name, ready_path = "the embedded S3 server", "moto-server.log", "/moto-api/"

    def command(self) -> list[str]:
        with needs_extra("the embedded S3 server"):
            import moto.server  # noqa: F401 - only to name the extra when moto is missing
        return [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]

    def failed(self, message: str) -> Exception:
        return LocalS3Error(message)

    @property
    def endpoint(self) -> str:
        """The server's URL (``http://host:port``)."""
        return self.url

    def ensure_bucket(self, bucket: str = DLQ_BUCKET) -> None:
        """Create ``bucket`` on the server unless it exists."""
        store = ObjectStore(
            f"s3://{bucket}", endpoint=self.endpoint, access_key=ACCESS_KEY, secret_key=ACCESS_KEY
        )
        try:
            store.ensure_bucket()
        finally:
            store.close()
