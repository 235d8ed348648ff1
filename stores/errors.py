"""Store errors, split by what the runtime should do with them."""

from __future__ import annotations

__all__ = ["StoreError", "TransientStoreError", "PermanentStoreError"]


class StoreError(Exception):
    """A store operation failed."""


class TransientStoreError(StoreError):
    """Retry later: timeout, unavailable, overloaded, 5xx, 429."""


class PermanentStoreError(StoreError):
    """Retrying the same write will fail again: the message is bad (4xx, schema)."""
