"""The schema-registry stand-in (``framework.decoders.registry_server``) in a process of its own, for
``converge stack`` (the tests start it in-process: ``RegistryStandIn``).

``with LocalRegistry(log_dir) as registry:`` starts it on a free loopback port and stops it on exit;
``registry.url`` is its URL. It is a stand-in, not a schema registry: schemas live in its memory
only (a stopped stand-in has forgotten them) and it serves only the REST subset converge's
decoders and the usual serializers use.
"""

from __future__ import annotations

import sys

from framework.core.errors import ConvergeError
from framework.local_process import LocalServer

__all__ = ["LocalRegistry", "LocalRegistryError"]


class LocalRegistryError(ConvergeError, RuntimeError):
    """The registry stand-in could not be started."""


class LocalRegistry(LocalServer):
    """One registry stand-in process on 127.0.0.1 (``LocalServer``), logging to
    ``log_dir/registry-stand-in.log``."""

    what, log_name, ready_path = "the registry stand-in", "registry-stand-in.log", "/subjects"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "framework.decoders.registry_server", "--port", str(self.port)]

    def failed(self, message: str) -> Exception:
        return LocalRegistryError(message)
