"""Store errors, split by what the runtime should do with them."""

from __future__ import annotations

from framework.core.errors import BadMessage, ConvergeError, Transient

__all__ = ["StoreError", "TransientStoreError", "PermanentStoreError"]


class StoreError(ConvergeError):
    """A store operation failed."""


class TransientStoreError(StoreError, Transient):
    """Retry later: timeout, unavailable, overloaded, 5xx, 429."""


class PermanentStoreError(StoreError, BadMessage):
    """Retrying the same write will fail again: the message is bad (4xx, schema)."""
