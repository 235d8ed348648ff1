"""botocore's exceptions mapped onto the store errors: retry later, or the request is wrong."""

from __future__ import annotations

from stores.errors import PermanentStoreError, StoreError, TransientStoreError

__all__ = [
    "ObjectStoreError",
    "TransientObjectError",
    "PermanentObjectError",
    "DamagedObjectError",
    "ChangedObjectError",
    "map_error",
]


class ObjectStoreError(StoreError):
    """An object-storage request failed."""


class TransientObjectError(ObjectStoreError, TransientStoreError):
    """Retry later: the endpoint is unreachable, timed out, throttled or answered 5xx."""


class PermanentObjectError(ObjectStoreError, PermanentStoreError):
    """The request itself is refused (no such bucket, access denied, bad argument): retrying fails again."""


class DamagedObjectError(ObjectStoreError):
    """The bytes stored or read back differ from the bytes sent (size or checksum)."""


class ChangedObjectError(ObjectStoreError):
    """A conditional write or delete lost: the object changed (or went) since its ETag was read."""


#: S3 error codes that mean the service is busy or failing, whatever the HTTP status says.
_BUSY = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
         "InternalError", "ServiceUnavailable", "OperationAborted", "ConditionalRequestConflict"}  # fmt: skip
#: S3 error codes that mean the body did not arrive as sent.
_DIGEST = {"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch"}


def map_error(exc: BaseException, what: str) -> ObjectStoreError:
    """The store error ``exc`` (raised by botocore during ``what``) means."""
    from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        message = f"{what}: {code or status} {err.get('Message', '')}".rstrip()
        if code in _DIGEST or "checksum" in str(err.get("Message", "")).lower():
            return DamagedObjectError(message)
        if code in _BUSY or status >= 500 or status == 429:
            return TransientObjectError(message)
        return PermanentObjectError(message)
    if isinstance(exc, ConnectionError | HTTPClientError):
        return TransientObjectError(f"{what}: {exc}")
    if isinstance(exc, BotoCoreError):
        return PermanentObjectError(f"{what}: {exc}")
    if isinstance(exc, OSError | TimeoutError):
        return TransientObjectError(f"{what}: {exc}")
    return ObjectStoreError(f"{what}: {exc!r}")
