"""CloudEvents 1.0 on Kafka (the Kafka protocol binding), in structured and binary content mode.

- Structured mode: the header ``content-type`` is ``application/cloudevents+json`` (or the value is
  a JSON object with ``specversion``): the value holds every attribute and ``data`` (or
  ``data_base64``).
- Binary mode: the attributes are ``ce_<name>`` headers (UTF-8), the value is the data, its
  ``content-type`` header the ``datacontenttype`` (JSON data is parsed; other data is kept as
  ``data_base64``).

The event: ``event_id`` is ``<id>@<source>`` (CloudEvents ids are unique per source); the ordering
key is the Kafka key (UTF-8), else the ``partitionkey`` extension; ``type`` is ``type``; the
payload is ``{"data": <data>, "attributes": {every other attribute}}``.

**Version rule**: the ``time`` attribute (RFC 3339, when the occurrence happened by the source's
clock; integer microseconds, finer digits cut), unless ``version_attribute`` names an extension
attribute carrying the source's version in integer microseconds (CloudEvents' own ``sequence``
extension is a string ordered only within one source, so it is not a version). An event without
it is a ``DecodeError`` parked at ``parse``; so is one missing a required attribute or of another
``specversion``. ``occurred_at`` is ``time`` (default: the version).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from framework.core.events import Event
from framework.decoders.base import DecodeError, Record, header
from framework.decoders.fields import micros

__all__ = ["CloudEventsDecoder", "STRUCTURED"]

#: The content type of a structured-mode CloudEvent in JSON.
STRUCTURED = "application/cloudevents+json"
_REQUIRED = ("id", "source", "specversion", "type")


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json") or media == "text/json"


def _time(text: Any, name: str) -> int:
    if not isinstance(text, str):
        raise DecodeError(name, f"must be an RFC 3339 timestamp, got {type(text).__name__}")
    value = text.strip()
    if "." in value:  # Python parses at most 6 fraction digits: cut finer ones
        head, _, rest = value.partition(".")
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    try:
        moment = dt.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise DecodeError(name, f"not an RFC 3339 timestamp: {text!r}") from None
    return micros(moment, "us", name)


class CloudEventsDecoder:
    """CloudEvents in structured or binary mode to events (see the module doc)."""

    name: ClassVar[str] = "cloudevents"
    checks_key: ClassVar[bool] = False

    def __init__(self, *, version_attribute: str | None = None) -> None:
        self.version_attribute = version_attribute

    def _structured(self, record: Record) -> dict[str, Any]:
        try:
            attrs = json.loads(record.value or b"")
        except (ValueError, RecursionError) as exc:
            raise DecodeError("value", f"a structured CloudEvent is not JSON: {exc}") from None
        if not isinstance(attrs, dict):
            raise DecodeError(
                "value", f"a structured CloudEvent must be a JSON object, got {type(attrs).__name__}"
            )
        if "data_base64" in attrs:
            if "data" in attrs:
                raise DecodeError("data", "both data and data_base64")
            attrs["data"] = {"data_base64": attrs.pop("data_base64")}
        return attrs

    def _binary(self, record: Record) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for name, value in record.headers:
            if name.startswith("ce_"):
                try:
                    attrs[name[3:]] = (value or b"").decode("utf-8")
                except UnicodeDecodeError:
                    raise DecodeError(name, "a CloudEvents header is not UTF-8") from None
        content_type = header(record, "content-type")
        ctype = None if content_type is None else content_type.decode("utf-8", "replace")
        if ctype is not None:
            attrs["datacontenttype"] = ctype
        if record.value is None:
            attrs["data"] = None
        elif _is_json(ctype):
            try:
                attrs["data"] = json.loads(record.value)
            except (ValueError, RecursionError) as exc:
                raise DecodeError("data", f"{ctype or 'JSON'} data is not JSON: {exc}") from None
        else:
            attrs["data"] = {"data_base64": base64.b64encode(record.value).decode("ascii")}
        return attrs

    def decode(self, record: Record) -> Event:
        content_type = header(record, "content-type")
        structured = content_type is not None and content_type.decode("utf-8", "replace").lower().startswith(
            STRUCTURED
        )
        if not structured and not any(k.startswith("ce_") for k, _ in record.headers):
            structured = True  # no binary-mode headers: the value must be the whole event
        attrs = self._structured(record) if structured else self._binary(record)
        for name in _REQUIRED:
            if not isinstance(attrs.get(name), str) or not attrs[name]:
                raise DecodeError(name, "missing: a required CloudEvents attribute")
        if attrs["specversion"] != "1.0":
            raise DecodeError("specversion", f"{attrs['specversion']!r} is not 1.0")
        occurred = _time(attrs["time"], "time") if attrs.get("time") is not None else None
        if self.version_attribute is None:
            if occurred is None:
                raise DecodeError("time", "missing: the version (the source's time of the occurrence)")
            version = occurred
        else:
            raw = attrs.get(self.version_attribute)
            try:
                number = (
                    raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw))
                )  # header text
                version = micros(number, "us", self.version_attribute)
            except (TypeError, ValueError):
                raise DecodeError(
                    self.version_attribute, f"must be integer microseconds, got {raw!r}"
                ) from None
        if record.key is not None:
            try:
                ordering = record.key.decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeError("key", "the Kafka key is not UTF-8 text") from None
        else:
            ordering = attrs.get("partitionkey") or ""
        if not isinstance(ordering, str) or not ordering or len(ordering) > 512:
            raise DecodeError("key", "no ordering key: neither a Kafka key nor a partitionkey attribute")
        event_id = f"{attrs['id']}@{attrs['source']}"
        if len(event_id) > 512 or len(attrs["type"]) > 128:
            raise DecodeError("id", "id and source, or type, too long")
        data = attrs.pop("data", None)
        payload: Mapping[str, Any] = {"data": data, "attributes": attrs}
        occurred_at = occurred if occurred is not None else version
        return Event(event_id, ordering, version, occurred_at, attrs["type"], payload)

    def __repr__(self) -> str:
        return "CloudEventsDecoder()"
