"""SQLite exceptions mapped to the store's transient / permanent split."""

from __future__ import annotations

import sqlite3

from stores.errors import PermanentStoreError, StoreError, TransientStoreError

__all__ = ["map_error"]


def map_error(exc: BaseException, what: str) -> BaseException:
    """The store error for a SQLite failure of ``what``; other exceptions are returned unchanged.

    ``OperationalError`` (locked, busy, I/O) is transient; any other ``sqlite3.Error``
    is permanent. Schema and mutation errors (and bugs) pass through as they are.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.OperationalError):
        err: StoreError = TransientStoreError(f"{what}: sqlite: {exc}")
    elif isinstance(exc, sqlite3.Error):
        err = PermanentStoreError(f"{what}: sqlite: {exc}")
    else:
        return exc
    err.__cause__ = exc
    return err
