"""A corpus of hostile messages for the order test app, each with where and how it must be parked."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.support.order_runs import tick_event

__all__ = ["Poison", "poison_corpus"]


@dataclass(frozen=True)
class Poison:
    """One hostile message for Kafka key ``key``: ``stage`` and ``error_class`` it is parked with."""

    name: str
    key: bytes
    value: bytes
    stage: str
    error_class: str


def _envelope(key: str, tag: str, **fields: object) -> bytes:
    base: dict[str, object] = {"event_id": f"{key}-poison-{tag}", "ordering_key": key, "version": 1_000_000,
                               "occurred_at": 1_000_000, "type": "tick", "payload": {"n": 0}}  # fmt: skip
    base.update(fields)
    return json.dumps(base).encode()


def poison_corpus(keys: list[str]) -> list[Poison]:
    """Every hostile message, spread round robin over ``keys`` (Kafka key = ordering key), plus
    one under a Kafka key that is not UTF-8. Each value is unique under its key."""
    deep = 100_000
    items: list[tuple[str, bytes | None, str, str]] = [
        ("invalid UTF-8", b"\xff\xfe" + tick_event("x", 0)[2:], "parse", "EventError"),
        ("empty value", b"", "parse", "EventError"),
        ("JSON null", b"null", "parse", "EventError"),
        ("JSON array", None, "parse", "EventError"),  # the envelope inside an array
        ("JSON string", b'"tick"', "parse", "EventError"),
        ("JSON number", b"42", "parse", "EventError"),
        ("huge version", None, "parse", "EventError"),
        ("float version", None, "parse", "EventError"),
        ("negative version", None, "parse", "EventError"),
        ("10 KB event_id", None, "parse", "EventError"),
        ("10 KB ordering_key", None, "parse", "EventError"),
        ("payload nested 100,000 levels", None, "parse", "EventError"),
        ("5,000-digit integer", None, "parse", "EventError"),
        ("5,000-digit version", None, "parse", "EventError"),
        ("lone surrogate event_id", None, "parse", "EventError"),
        ("lone surrogate ordering_key", None, "parse", "EventError"),
        ("payload not an object", None, "parse", "EventError"),
        ("missing fields", None, "parse", "EventError"),
        ("unknown type", None, "map", "BadMessage"),
        ("ill-typed payload field", None, "map", "TypeError"),
    ]
    out: list[Poison] = []
    for i, (name, value, stage, error_class) in enumerate(items):
        key = keys[i % len(keys)]
        if value is None:
            value = _value(name, key, deep)
        out.append(Poison(name, key.encode(), value, stage, error_class))
    out.append(Poison("Kafka key not UTF-8", b"\xff\xfe-key", b"{not json", "parse", "EventError"))
    return out


def _value(name: str, key: str, deep: int) -> bytes:
    tag = name.replace(" ", "-")
    if name == "JSON array":
        return b"[" + tick_event(key, 0) + b"]"
    if name == "huge version":
        return _envelope(key, tag, version=2**70)
    if name == "float version":
        return _envelope(key, tag, version=1e30)
    if name == "negative version":
        return _envelope(key, tag, version=-5)
    if name == "10 KB event_id":
        return _envelope(key, tag, event_id="e" * 10_240)
    if name == "10 KB ordering_key":
        return _envelope(key, tag, ordering_key="k" * 10_240)
    if name == "payload nested 100,000 levels":
        head = _envelope(key, tag, payload={"n": 0, "deep": 0}).decode()
        return head.replace('"deep": 0', '"deep": ' + "[" * deep + "]" * deep).encode()
    if name == "5,000-digit integer":
        return _envelope(key, tag).replace(b'"n": 0', b'"n": ' + b"9" * 5000)
    if name == "5,000-digit version":
        return _envelope(key, tag).replace(b'"version": 1000000', b'"version": ' + b"7" * 5000)
    if name == "lone surrogate event_id":
        lone = b'"\\ud800-' + tag.encode() + b'"'
        return _envelope(key, tag).replace(f'"{key}-poison-{tag}"'.encode(), lone)
    if name == "lone surrogate ordering_key":
        return _envelope(key, tag).replace(f'"ordering_key": "{key}"'.encode(), b'"ordering_key": "\\udc00"')
    if name == "payload not an object":
        return _envelope(key, tag, payload=[1, 2])
    if name == "missing fields":
        return json.dumps({"event_id": f"{key}-poison-{tag}", "ordering_key": key}).encode()
    if name == "unknown type":
        return _envelope(key, tag, type="no-such-type")
    if name == "ill-typed payload field":
        return _envelope(key, tag, payload={"n": "ten"})
    raise ValueError(name)
