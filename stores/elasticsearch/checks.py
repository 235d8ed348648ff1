"""Input checks and error translation for the Elasticsearch adapter.

Everything here runs without I/O: names, ids, versions and documents are
checked (and documents encoded) before a request is built, and client
exceptions are sorted into transient and permanent store errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from elasticsearch import ApiError, ConnectionTimeout, SerializationError, TransportError
from elasticsearch import ConnectionError as EsConnectionError
from elasticsearch.serializer import JsonSerializer

from framework.core.mutations import MutationError, check_version
from stores.base import BulkItem
from stores.errors import PermanentStoreError, StoreError, TransientStoreError

__all__ = [
    "DocumentError",
    "DEFAULT_MAX_DOC_BYTES",
    "MAX_ID_BYTES",
    "METADATA_FIELDS",
    "check_name",
    "check_doc_id",
    "check_doc_version",
    "encode_document",
    "is_retryable_status",
    "error_summary",
    "store_error",
    "bulk_item",
]

#: Default limit on one encoded document.
DEFAULT_MAX_DOC_BYTES = 1 << 20
#: Elasticsearch rejects ``_id`` values longer than 512 bytes.
MAX_ID_BYTES = 512
#: Field names Elasticsearch reserves for document metadata.
METADATA_FIELDS = frozenset(
    {"_id", "_index", "_source", "_routing", "_version", "_seq_no", "_primary_term",
     "_field_names", "_ignored", "_doc_count", "_tier", "_data_stream_timestamp"}
)  # fmt: skip

# A conservative subset of Elasticsearch's index-name rules: lowercase, no
# wildcard/separator characters, no leading '-', '_', '+' or '.' (hidden/system).
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,199}$")
_DEFAULT = JsonSerializer().default


class DocumentError(MutationError):
    """A document, id, version or index name is unusable; raised before any request."""


def check_name(name: object, what: str = "alias") -> str:
    """Return ``name`` if it is a safe lowercase index or alias name."""
    if not isinstance(name, str) or not _NAME.match(name) or name in {".", ".."}:
        raise DocumentError(what, f"{name!r} is not a lowercase index name ([a-z0-9][a-z0-9._-]{{0,199}})")
    return name


def check_doc_id(doc_id: object) -> str:
    """Return ``doc_id`` if it is a non-empty string of at most 512 UTF-8 bytes."""
    if not isinstance(doc_id, str) or not doc_id:
        raise DocumentError("doc_id", f"must be a non-empty string, got {doc_id!r}")
    try:
        size = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise DocumentError("doc_id", "is not valid UTF-8 text") from exc
    if size > MAX_ID_BYTES:
        raise DocumentError("doc_id", f"is {size} bytes, more than {MAX_ID_BYTES}")
    return doc_id


def check_doc_version(version: object) -> int:
    """Return ``version`` if it is a non-negative int64, else raise DocumentError."""
    try:
        return check_version(version)
    except MutationError as exc:
        raise DocumentError(exc.field, str(exc).split(": ", 1)[-1]) from None


def encode_document(doc: object, max_bytes: int, reserved: frozenset[str] = frozenset()) -> bytes:
    """Encode ``doc`` as compact JSON; reject non-mappings, NaN/inf, unknown types and oversize.

    Dates, UUIDs and Decimals are encoded as the Elasticsearch client would.
    """
    if not isinstance(doc, Mapping):
        raise DocumentError("doc", f"must be a mapping, got {type(doc).__name__}")
    for key in doc:
        if not isinstance(key, str):
            raise DocumentError("doc", f"field names must be strings, got {key!r}")
        if key in METADATA_FIELDS or key in reserved:
            raise DocumentError(f"doc.{key}", "is a reserved field name")
    try:
        text = json.dumps(doc, default=_DEFAULT, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        body = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeError, TransportError) as exc:
        raise DocumentError("doc", f"is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise DocumentError("doc", "is nested too deeply to encode") from None
    if len(body) > max_bytes:
        raise DocumentError("doc", f"encodes to {len(body)} bytes, more than {max_bytes}")
    return body


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


def store_error(exc: Exception, what: str) -> StoreError:
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
