"""Elasticsearch client exceptions and bulk item results mapped to the store's outcomes.

A whole request that failed: connection failures, timeouts, 408, 429 and 5xx
are transient; any other 4xx and serialisation failures are permanent. A bulk
item is ``ok``, ``stale`` (409: the index holds something newer) or ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticsearch import ApiError, ConnectionTimeout, SerializationError
from elasticsearch import ConnectionError as EsConnectionError

from stores.base import BulkItem
from stores.errors import PermanentStoreError, StoreError, TransientStoreError

__all__ = ["map_error", "is_retryable_status", "error_summary", "bulk_item"]


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status means "try again later": 408, 429 or any 5xx."""
    return status in (408, 429) or 500 <= status <= 599


def error_summary(body: Any) -> str:
    """``type: reason`` of an Elasticsearch error body (or its text when unstructured)."""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            return f"{err.get('type', 'error')}: {err.get('reason', '')}".rstrip(": ")
        return str(err)
    return str(body)[:500]


def map_error(exc: BaseException, what: str) -> StoreError:
    """The store error for a failed whole request (see the adapter docstring for the rules)."""
    if isinstance(exc, ApiError):
        status = exc.meta.status
        msg = f"{what}: HTTP {status} {error_summary(exc.body)}"
        return TransientStoreError(msg) if is_retryable_status(status) else PermanentStoreError(msg)
    if isinstance(exc, EsConnectionError):  # includes TLS errors
        return TransientStoreError(f"{what}: connection failed: {exc}")
    if isinstance(exc, ConnectionTimeout):
        return TransientStoreError(f"{what}: timed out: {exc}")
    if isinstance(exc, SerializationError):
        return PermanentStoreError(f"{what}: serialisation failed: {exc}")
    # Any other transport-level failure: the request may not have arrived.
    return TransientStoreError(f"{what}: {type(exc).__name__}: {exc}")


def bulk_item(doc_id: str, op_type: str, result: Mapping[str, Any]) -> BulkItem:
    """One bulk response item as an ok / stale / error outcome."""
    status = int(result.get("status", 0))
    error = result.get("error")
    if error is None and (200 <= status < 300 or (op_type == "delete" and status == 404)):
        # A 404 delete without an error body is "not_found": the versioned tombstone is written.
        return BulkItem(doc_id, "ok", status)
    if status == 409:
        return BulkItem(doc_id, "stale", status, reason=error_summary({"error": error}))
    return BulkItem(
        doc_id, "error", status, retryable=is_retryable_status(status),
        reason=error_summary({"error": error}) if error is not None else f"HTTP {status}",
    )  # fmt: skip
