"""The schema-registry wire format and a caching registry client.

A record in the wire format (Confluent's, also Apicurio's and Redpanda's in compatibility mode) is
the magic byte ``0``, the schema id as 4 bytes big-endian, then the payload (for Protobuf, the
message indexes first). ``split_wire`` reads the frame; ``SchemaRegistry`` fetches a schema by id
over the registry's REST API (``GET /schemas/ids/{id}``) once and keeps it, and keeps the parsed
form a decoder builds from it (``parsed``), so the registry is asked once per schema id and
process, never per record.

An id the registry does not know is ``UnknownSchema`` (a ``DecodeError``: parked at stage
``parse``; not remembered, so a schema registered later is found). A registry that does not answer
(connection refused, timeout, 5xx) is ``RegistryUnavailable``, a ``Transient``: the worker retries
the record as it retries a sink, it does not park it. The fetch is synchronous (``urllib``, bounded
by ``timeout``): once per schema id, so the event loop waits on it at most once a schema.
"""

from __future__ import annotations

import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from framework.core.errors import Transient
from framework.decoders.base import DecodeError

__all__ = [
    "MAGIC",
    "RegisteredSchema",
    "SchemaRegistry",
    "UnknownSchema",
    "RegistryUnavailable",
    "split_wire",
    "wire",
]

T = TypeVar("T")
#: The wire format's first byte.
MAGIC = 0
_HEADER = struct.Struct(">bI")


class UnknownSchema(DecodeError):
    """The registry has no schema of this id (or one of another type than the decoder's)."""


class RegistryUnavailable(Transient):
    """The registry did not answer: retry later."""


def split_wire(value: bytes | None) -> tuple[int, bytes]:
    """``(schema id, payload)`` of a wire-format value; DecodeError when it is not one."""
    if value is None:
        raise DecodeError("value", "null (a tombstone): no schema id")
    if len(value) < _HEADER.size:
        raise DecodeError("magic", f"{len(value)} bytes: shorter than the wire format's 5-byte header")
    magic, schema_id = _HEADER.unpack_from(value)
    if magic != MAGIC:
        raise DecodeError("magic", f"first byte is {value[0]}, not the wire format's {MAGIC}")
    return schema_id, bytes(value[_HEADER.size :])


def wire(schema_id: int, payload: bytes) -> bytes:
    """A value in the wire format (what a producer's serializer writes)."""
    return _HEADER.pack(MAGIC, schema_id) + payload


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry holds it: id, type (``AVRO``, ``JSON``, ``PROTOBUF``) and text."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Mapping[str, Any], ...] = ()


class SchemaRegistry:
    """A client of a schema registry's REST API at ``url``, caching every schema it fetched."""

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._schemas: dict[int, RegisteredSchema] = {}
        self._parsed: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()
        #: how many schemas were fetched (each id once)
        self.fetches = 0

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url!r})"

    def __getstate__(self) -> dict[str, Any]:  # shipped to Spark executors: without lock and cache
        return {"url": self.url, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], timeout=state["timeout"])  # type: ignore[misc]

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json", "Accept": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - the configured registry
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 422):
                try:
                    message = json.loads(exc.read()).get("message", "")
                except Exception:  # noqa: BLE001 - the status says enough
                    message = ""
                raise UnknownSchema("schema", f"{method} {path}: {exc.code} {message}".strip()) from None
            raise RegistryUnavailable(
                f"schema registry {self.url}: {method} {path}: HTTP {exc.code}"
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise RegistryUnavailable(f"schema registry {self.url}: {method} {path}: {exc}") from None
        except ValueError as exc:
            raise RegistryUnavailable(
                f"schema registry {self.url}: {method} {path}: not JSON: {exc}"
            ) from None

    def get(self, schema_id: int) -> RegisteredSchema:
        """The schema of ``schema_id`` (fetched once); UnknownSchema, RegistryUnavailable."""
        found = self._schemas.get(schema_id)
        if found is not None:
            return found
        answer = self._request("GET", f"/schemas/ids/{schema_id}")
        if not isinstance(answer, Mapping) or not isinstance(answer.get("schema"), str):
            raise RegistryUnavailable(f"schema registry {self.url}: unexpected answer for id {schema_id}")
        schema = RegisteredSchema(
            schema_id,
            str(answer.get("schemaType") or "AVRO"),
            answer["schema"],
            tuple(answer.get("references") or ()),
        )
        with self._lock:
            self.fetches += 1
            return self._schemas.setdefault(schema_id, schema)

    def parsed(self, schema_id: int, kind: str, parse: Callable[[RegisteredSchema], T]) -> T:
        """``parse(schema)`` of ``schema_id`` for a decoder of schema type ``kind`` (built once, kept);
        UnknownSchema when the id's schema is of another type."""
        key = (kind, schema_id)
        if key in self._parsed:
            return self._parsed[key]
        schema = self.get(schema_id)
        if schema.schema_type != kind:
            raise UnknownSchema("schema", f"id {schema_id} is a {schema.schema_type} schema, not {kind}")
        try:
            value = parse(schema)
        except Exception as exc:  # noqa: BLE001 - a schema the decoder cannot use fails its records
            raise UnknownSchema("schema", f"id {schema_id}: unusable {kind} schema: {exc}") from exc
        with self._lock:
            return self._parsed.setdefault(key, value)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register ``schema`` under ``subject`` (``POST /subjects/{subject}/versions``); its id."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        answer = self._request("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)
        return int(answer["id"])
