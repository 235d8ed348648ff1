"""An S3 bucket (and key prefix) through boto3: verified put, get, list, copy, delete, conditional writes.

Every call is synchronous (boto3 is); async callers wrap it in ``asyncio.to_thread``. A put
sends the body's MD5 (``Content-MD5``) and SHA-256 (``x-amz-checksum-sha256``), so the service
refuses a body damaged on the way, and then reads back the size and the digest the service
computed (``verify``): ``put`` returns only once the stored object is known to hold the bytes
sent. The SHA-256 also goes into the object's metadata, and ``get`` checks the body it
receives against it. ``if_absent`` and ``if_match`` make a put (``if_match`` a delete too) a
compare-and-set: ``If-None-Match: *`` creates only a new key, ``If-Match: <ETag>`` replaces only
the version read.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from framework.core.extras import needs_extra
from stores.objects.error_map import ChangedObjectError, DamagedObjectError, map_error

__all__ = ["Fetched", "ObjectInfo", "ObjectStore", "parse_s3_url"]

#: The user metadata key holding the hex SHA-256 of the body (kept by every S3 implementation,
#: unlike the additional checksums, which some S3-compatible servers do not store).
SHA256_META = "converge-sha256"


def parse_s3_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket/prefix``; the prefix has no leading or trailing slash.

    ValueError for another scheme or no bucket.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"not an object-storage URL: {url!r} (s3://BUCKET/PREFIX)")
    return parts.netloc, parts.path.strip("/")


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: its key (without the store's prefix), size, hex SHA-256 (when known) and ETag."""

    key: str
    size: int
    sha256: str | None
    etag: str


@dataclass(frozen=True)
class Fetched:
    """An object's body as read, its ETag, the size the service announced and the SHA-256 in its metadata."""

    data: bytes
    etag: str
    size: int
    sha256: str | None

    @property
    def actual_sha256(self) -> str:
        """The hex SHA-256 of the bytes read."""
        return hashlib.sha256(self.data).hexdigest()

    def problem(self) -> str | None:
        """What is wrong with the body read (None: its size and content digest match), in one phrase."""
        if len(self.data) != self.size:
            return f"size mismatch: {len(self.data)} bytes read, the object has {self.size}"
        if self.sha256 is not None and self.actual_sha256 != self.sha256:
            return (f"content digest mismatch: the {self.size} bytes read have SHA-256 {self.actual_sha256},"
                    f" the object's stored SHA-256 is {self.sha256}")  # fmt: skip
        return None


class ObjectStore:
    """The objects under ``s3://bucket/prefix``; keys given to the methods are relative to the prefix.

    ``endpoint`` is the service URL (None: AWS's own for ``region``). Credentials given here are
    used as they are; without them boto3's default chain applies (instance role, its config files).
    Failures are ``TransientObjectError`` (retry later), ``PermanentObjectError`` or
    ``DamagedObjectError`` (see ``error_map``).
    """

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        timeout_s: float = 10.0,
        attempts: int = 3,
    ) -> None:
        self.url = url
        self.bucket, self.prefix = parse_s3_url(url)
        with needs_extra("object storage"):
            import boto3
            from botocore.config import Config

        config = Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"max_attempts": attempts, "mode": "standard"},
            # checksums only where this module asks for them: not every S3-compatible server keeps them
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._client: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=region or "us-east-1",
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=config,
        )

    def key(self, name: str) -> str:
        """The full object key of ``name`` (the prefix joined in front)."""
        name = name.lstrip("/")
        return f"{self.prefix}/{name}" if self.prefix else name

    def _name(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def _call(self, what: str, op: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, op)(Bucket=self.bucket, **kwargs)
        except Exception as exc:  # botocore's and the transport's errors, mapped
            raise map_error(
                exc, f"{what} s3://{self.bucket}/{kwargs.get('Key', kwargs.get('Prefix', ''))}"
            ) from exc

    # -- writing ---------------------------------------------------------------------
    def put(
        self, name: str, data: bytes, *, if_absent: bool = False, if_match: str | None = None
    ) -> ObjectInfo:
        """Store ``data`` at ``name`` and verify what the service stored (see ``verify``).

        ``if_absent`` makes the write conditional (``If-None-Match: *``): ``FileExistsError``
        when an object is there already. ``if_match`` (an ETag) replaces only that version:
        ``ChangedObjectError`` when the object changed or went meanwhile. ``DamagedObjectError``
        when the service refused the body's digest or the stored object differs from ``data``.
        """
        return self._put(
            name,
            data,
            hashlib.md5(data, usedforsecurity=False).digest(),
            hashlib.sha256(data).digest(),
            if_absent,
            if_match,
        )

    def _put(
        self, name: str, data: bytes, md5: bytes, sha256: bytes, if_absent: bool, if_match: str | None = None
    ) -> ObjectInfo:
        """``put`` of ``data`` announced with the digests ``md5`` and ``sha256`` (of the bytes meant)."""
        kwargs: dict[str, Any] = {
            "Key": self.key(name),
            "Body": data,
            "ContentMD5": base64.b64encode(md5).decode(),
            "ChecksumSHA256": base64.b64encode(sha256).decode(),
            "Metadata": {SHA256_META: sha256.hex()},
        }
        if if_absent:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            self._call("put", "put_object", **kwargs)
        except Exception as exc:
            if if_match is not None and (_precondition_failed(exc) or _not_found(exc)):
                raise ChangedObjectError(
                    f"s3://{self.bucket}/{self.key(name)} is no longer {if_match}"
                ) from None
            if _precondition_failed(exc):
                raise FileExistsError(f"s3://{self.bucket}/{self.key(name)} exists") from None
            raise
        return self.verify(name, len(data), md5, sha256)

    def verify(self, name: str, size: int, md5: bytes, sha256: bytes) -> ObjectInfo:
        """The object at ``name``, after checking that the service holds ``size`` bytes with these digests.

        The check uses what the service computed itself: the SHA-256 checksum it returns (AWS S3
        keeps the one sent with the put), else the ETag, which is the body's MD5 for a single-part
        upload without KMS encryption. ``DamagedObjectError`` on a mismatch or a missing object.
        """
        where = f"s3://{self.bucket}/{self.key(name)}"
        r = self._head(name)
        if r is None:
            raise DamagedObjectError(f"{where}: not found right after it was written")
        info = _info(name, r)
        stored = r.get("ChecksumSHA256")
        if stored is not None:
            same = base64.b64decode(stored) == sha256
        else:
            same = info.etag.strip('"') == md5.hex()
        if info.size != size or not same:
            raise DamagedObjectError(
                f"{where}: the service holds {info.size} bytes (ETag {info.etag}, SHA-256 {stored}), "
                f"not the {size} bytes with MD5 {md5.hex()} and SHA-256 {sha256.hex()} sent"
            )
        return info

    def create(self, name: str, data: bytes) -> bool:
        """``put`` only if no object is at ``name``; False when one is (the compare-and-set of a new key)."""
        try:
            self.put(name, data, if_absent=True)
        except FileExistsError:
            return False
        return True

    def delete(self, name: str, *, if_match: str | None = None) -> None:
        """Remove the object at ``name`` (no error when there is none).

        With ``if_match`` (an ETag) only that version: ``ChangedObjectError`` when the object
        changed or went meanwhile.
        """
        if if_match is None:
            self._call("delete", "delete_object", Key=self.key(name))
            return
        try:
            self._call("delete", "delete_object", Key=self.key(name), IfMatch=if_match)
        except Exception as exc:
            if _precondition_failed(exc) or _not_found(exc):
                raise ChangedObjectError(
                    f"s3://{self.bucket}/{self.key(name)} is no longer {if_match}"
                ) from None
            raise

    def copy(self, source: str, target: str) -> None:
        """Copy the object at ``source`` to ``target`` inside the bucket (the service copies the bytes).

        ``FileNotFoundError`` when there is no object at ``source``.
        """
        try:
            self._call("copy", "copy_object", Key=self.key(target),
                       CopySource={"Bucket": self.bucket, "Key": self.key(source)})  # fmt: skip
        except Exception as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"s3://{self.bucket}/{self.key(source)}") from None
            raise

    # -- reading ---------------------------------------------------------------------
    def head(self, name: str) -> ObjectInfo | None:
        """The object at ``name``, or None when there is none."""
        r = self._head(name)
        return None if r is None else _info(name, r)

    def _head(self, name: str) -> dict[str, Any] | None:
        try:
            r: dict[str, Any] = self._call("head", "head_object", Key=self.key(name), ChecksumMode="ENABLED")
        except Exception as exc:
            if _not_found(exc):
                return None
            raise
        return r

    def get(self, name: str) -> bytes:
        """The bytes at ``name``, checked against their stored SHA-256.

        ``FileNotFoundError`` when there is no object; ``DamagedObjectError`` when the body read
        does not match its size or checksum.
        """
        return self.read(name)[0]

    def read(self, name: str) -> tuple[bytes, str]:
        """``get`` with the ETag of the version read (for a later ``if_match``)."""
        got = self.fetch(name)
        problem = got.problem()
        if problem is not None:
            raise DamagedObjectError(f"s3://{self.bucket}/{self.key(name)}: {problem}")
        return got.data, got.etag

    def fetch(self, name: str) -> Fetched:
        """The bytes at ``name`` as read, with what the service says of them, unchecked (``Fetched.problem``).

        ``FileNotFoundError`` when there is no object. For a reader that wants the readable parts
        of a damaged object as well as the name of its damage.
        """
        try:
            r = self._call("get", "get_object", Key=self.key(name))
        except Exception as exc:
            if _not_found(exc):
                raise FileNotFoundError(f"s3://{self.bucket}/{self.key(name)}") from None
            raise
        try:
            data: bytes = r["Body"].read()
        except Exception as exc:
            raise map_error(exc, f"get s3://{self.bucket}/{self.key(name)}") from exc
        expected = (r.get("Metadata") or {}).get(SHA256_META)
        return Fetched(data, str(r.get("ETag", "")), int(r["ContentLength"]), expected)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """The objects whose name starts with ``prefix``, in key order (SHA-256 not read: None)."""
        token: str | None = None
        while True:
            whole = f"{self.prefix}/" if self.prefix else ""
            kwargs: dict[str, Any] = {"Prefix": self.key(prefix) if prefix else whole}
            if token:
                kwargs["ContinuationToken"] = token
            r = self._call("list", "list_objects_v2", **kwargs)
            for obj in r.get("Contents", []):
                yield ObjectInfo(self._name(obj["Key"]), int(obj["Size"]), None, str(obj.get("ETag", "")))
            token = r.get("NextContinuationToken")
            if not r.get("IsTruncated") or not token:
                return

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (for the embedded server and tests)."""
        try:
            self._call("head bucket", "head_bucket")
        except Exception as exc:
            if not _not_found(exc):
                raise
            self._call("create bucket", "create_bucket")

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()


def _info(name: str, head: dict[str, Any]) -> ObjectInfo:
    meta = head.get("Metadata") or {}
    return ObjectInfo(name, int(head["ContentLength"]), meta.get(SHA256_META), str(head.get("ETag", "")))


def _code(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc.__cause__, "response", None) or {}
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return str(response.get("Error", {}).get("Code", "")), status


def _not_found(exc: BaseException) -> bool:
    code, status = _code(exc)
    return status == 404 or code in ("NoSuchKey", "NotFound", "404")


def _precondition_failed(exc: BaseException) -> bool:
    code, status = _code(exc)
    return status == 412 or code == "PreconditionFailed"
