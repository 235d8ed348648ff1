"""Store errors, split by what the runtime should do with them."""

from __future__ import annotations

from framework.core.errors import BadMessage, ConvergeError, Transient

__all__ = ["StoreError", "TransientStoreError", "StoreClosed", "PermanentStoreError"]


class StoreError(ConvergeError):
    """A store operation failed."""


class TransientStoreError(StoreError, Transient):
    """Retry later: timeout, unavailable, overloaded, 5xx, 429."""


class StoreClosed(TransientStoreError):
    """The store was closed (its worker is stopping): never the message's fault. The runtime
    retries the write and never acknowledges it, so the record's next owner processes it."""


class PermanentStoreError(StoreError, BadMessage):
    """Retrying the same write will fail again: the message is bad (4xx, schema)."""
