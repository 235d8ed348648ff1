"""``Lookup``: a keyed table an agent reads, fed by the events of one topic.

A lookup entry is ``(value, version)`` under a string key. Entries merge by
their order (``Entry.order``): the higher version wins; on a tie the higher
``rank`` (BLAKE2b with a one-byte digest, ``digest_size=1``, of the value's
canonical JSON in UTF-8: sorted keys, no spaces, no ``\\u`` escapes), then the
larger such JSON, compared as bytes as the cell rule compares text. A value
that wins changes the entry's fingerprint, so its readers are mapped again
above their last write (``framework.state.version_rule``). The merge is
associative, commutative and idempotent, so a table fed with duplicates,
replays and reorderings of its entry events ends with the same entry per key
(``merge``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from framework.core.events import Event

__all__ = ["Lookup", "Entry", "merge", "entry_of", "entry_text", "canonical", "value_bytes"]


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # one encoder: half the cost of dumps
_UTF8 = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: Mapping[str, Any]) -> str:
    """The canonical JSON text of an entry value (sorted keys, no spaces)."""
    return _CANONICAL.encode(value)


def value_bytes(value: Mapping[str, Any]) -> bytes:
    """An entry value as the merge compares it: canonical JSON (sorted keys, no spaces, no
    ``\\u`` escapes) in UTF-8."""
    return _UTF8.encode(dict(value)).encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Entry:
    """One lookup entry: its value and the version of the event it came from."""

    value: Mapping[str, Any]
    version: int
    _order: tuple[int, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", MappingProxyType(dict(self.value)))

    @property
    def order(self) -> tuple[int, int, bytes]:
        """``(version, rank, value bytes)``: the merge keeps the larger."""
        if self._order is None:
            data = value_bytes(self.value)
            object.__setattr__(self, "_order", (hashlib.blake2b(data, digest_size=1).digest()[0], data))
        assert self._order is not None
        return (self.version, *self._order)

    @property
    def rank(self) -> int:
        """0-255, the one-byte BLAKE2b digest of the value's bytes: orders two values of one version
        before their bytes."""
        return self.order[1]

    @property
    def fingerprint(self) -> str:
        """A digest of the value (hex), to tell two values of one version apart."""
        if self._fingerprint is None:
            digest = hashlib.blake2b(self.order[2], digest_size=8).hexdigest()
            object.__setattr__(self, "_fingerprint", digest)
        assert self._fingerprint is not None
        return self._fingerprint

    def to_json(self) -> str:
        return _JSON.encode({"v": self.version, "value": dict(self.value)})

    @classmethod
    def from_json(cls, text: str | bytes) -> Entry:
        d = json.loads(text)
        return cls(d["value"], int(d["v"]))


def merge(old: Entry | None, new: Entry) -> Entry:
    """The entry that wins of ``old`` and ``new``: the larger ``Entry.order`` (version, rank,
    value bytes); ``old`` when they are equal."""
    if old is None or new.version > old.version:
        return new
    if new.version == old.version and new.order > old.order:
        return new
    return old


def _own_version(event: Event) -> int:
    return event.version


@dataclass(frozen=True)
class Lookup:
    """A table named ``name`` fed by the events of ``topic``.

    ``key(event)`` is the entry's key (None: the event carries no entry);
    ``value(event)`` its value (a JSON-able mapping); ``version(event)`` its
    version (default the event's). The three must be pure; an event for
    which one raises is no entry (counted as skipped, never fatal).
    """

    name: str
    topic: str
    key: Callable[[Event], str | None]
    value: Callable[[Event], Mapping[str, Any]]
    version: Callable[[Event], int] = field(default=_own_version)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"Lookup name {self.name!r}: letters, digits and _ only")
        if not self.topic:
            raise ValueError(f"Lookup {self.name}: topic must not be empty")


def entry_of(lookup: Lookup, event: Event) -> tuple[str, Entry] | None:
    """The ``(key, entry)`` that ``event`` carries for ``lookup``; None when it carries none.

    Raises whatever the lookup's functions raise, and when the value is not JSON (callers
    count it as a skip)."""
    found = entry_text(lookup, event)
    return None if found is None else found[:2]


def entry_text(lookup: Lookup, event: Event) -> tuple[str, Entry, str] | None:
    """``entry_of`` plus the entry's JSON (``Entry.to_json``: a value that is not JSON raises)."""
    key = lookup.key(event)
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ValueError(f"lookup {lookup.name}: key must be a non-empty string, got {key!r}")
    version = lookup.version(event)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"lookup {lookup.name}: version must be a non-negative int, got {version!r}")
    entry = Entry(dict(lookup.value(event)), version)
    return key, entry, entry.to_json()
