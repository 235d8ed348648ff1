"""Key-value stores under the join state: in memory (the test driver) and RocksDB (rocksdict).

Keys and values are text. ``scan(prefix)`` yields the items whose key
starts with ``prefix``, in key order (a snapshot: writing while iterating is
safe).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import Options, Rdict, WriteBatch

__all__ = ["KV", "MemoryKV", "RocksKV"]


class KV(Protocol):
    """A sorted text key-value store."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        """``put`` each item (in one write where the store can)."""

    def delete(self, key: str) -> None: ...

    def scan(self, prefix: str) -> Iterator[tuple[str, str]]: ...

    def close(self) -> None: ...


class MemoryKV:
    """A sorted dict."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._keys: list[str] = []

    def get(self, key: str) -> str | None:
        return self._data.get(key)

    def put(self, key: str, value: str) -> None:
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        for key, value in items:
            self.put(key, value)

    def delete(self, key: str) -> None:
        if self._data.pop(key, None) is not None:
            del self._keys[bisect.bisect_left(self._keys, key)]

    def scan(self, prefix: str) -> Iterator[tuple[str, str]]:
        i = bisect.bisect_left(self._keys, prefix)
        found = []
        while i < len(self._keys) and self._keys[i].startswith(prefix):
            found.append((self._keys[i], self._data[self._keys[i]]))
            i += 1
        return iter(found)

    def close(self) -> None:
        self._data.clear()
        self._keys.clear()


class RocksKV:
    """A RocksDB database (rocksdict, raw mode: nothing read back is unpickled)."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._db = Rdict(str(path), options=Options(raw_mode=True))

    def get(self, key: str) -> str | None:
        value = self._db.get(key.encode())
        return None if value is None else value.decode()

    def put(self, key: str, value: str) -> None:
        self._db[key.encode()] = value.encode()

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        """One RocksDB write batch."""
        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key.encode(), value.encode())
        self._db.write(batch)

    def delete(self, key: str) -> None:
        del self._db[key.encode()]

    def scan(self, prefix: str) -> Iterator[tuple[str, str]]:
        raw = prefix.encode()
        it = self._db.iter()
        it.seek(raw)
        found = []
        while it.valid() and it.key().startswith(raw):
            found.append((it.key().decode(), it.value().decode()))
            it.next()
        del it
        return iter(found)

    def close(self) -> None:
        self._db.close()
