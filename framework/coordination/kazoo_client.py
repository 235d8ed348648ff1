"""The ZooKeeper client both coordination backends share: connect, and map kazoo's errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

__all__ = ["connect", "call"]

T = TypeVar("T")


def connect(
    hosts: str,
    root: str,
    *,
    session_timeout: float,
    connect_timeout: float,
    retry: KazooRetry,
    unavailable: type[Exception],
    listener: Callable[[str], Any] | None = None,
) -> KazooClient:
    """A started client with ``root`` ensured; ``unavailable`` when no server answers in time."""
    client = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=retry)
    if listener is not None:
        client.add_listener(listener)
    try:
        client.start(timeout=connect_timeout)
        client.ensure_path(root)
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        raise unavailable(f"ZooKeeper {hosts}: {exc or type(exc).__name__}") from exc
    return client


def call(fn: Callable[[], T], hosts: str, unavailable: type[Exception]) -> T:
    """``fn()``; the node and version errors callers handle pass through, any other kazoo or
    timeout error becomes ``unavailable``."""
    try:
        return fn()
    except (NoNodeError, NodeExistsError, BadVersionError):
        raise
    except (KazooTimeoutError, KazooException) as exc:
        raise unavailable(f"ZooKeeper {hosts}: {exc or type(exc).__name__}") from exc
