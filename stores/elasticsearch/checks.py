"""Input checks for the Elasticsearch adapter (errors: ``stores.elasticsearch.error_map``).

Everything here runs without I/O: names, ids, versions and documents are
checked (and documents encoded) before a request is built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from elasticsearch import TransportError
from elasticsearch.serializer import JsonSerializer

from framework.core.mutations import MutationError, check_version

__all__ = [
    "DocumentError",
    "DEFAULT_MAX_DOC_BYTES",
    "MAX_ID_BYTES",
    "METADATA_FIELDS",
    "check_name",
    "check_doc_id",
    "check_doc_version",
    "encode_document",
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
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,199}")
_DEFAULT = JsonSerializer().default
#: ``json.dumps`` of a document as ``encode_document`` writes it, its encoder built once.
_encode = json.JSONEncoder(
    default=_DEFAULT, allow_nan=False, ensure_ascii=False, separators=(",", ":")
).encode


class DocumentError(MutationError):
    """A document, id, version or index name is unusable; raised before any request."""


def check_name(name: object, what: str = "alias") -> str:
    """Return ``name`` if it is a safe lowercase index or alias name."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in {".", ".."}:
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
        text = _encode(doc)
        body = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeError, TransportError) as exc:
        raise DocumentError("doc", f"is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise DocumentError("doc", "is nested too deeply to encode") from None
    if len(body) > max_bytes:
        raise DocumentError("doc", f"encodes to {len(body)} bytes, more than {max_bytes}")
    return body
