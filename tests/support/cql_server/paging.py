"""Paging by position: a page ends at a row's position; the next page starts strictly after it.

Every read lists its rows with an ascending ``Position`` (token, routing key,
clustering bytes in iteration order), so writes between pages neither repeat
nor skip rows, as with Cassandra's own paging state. The state also counts the
rows already returned, so ``LIMIT`` holds across pages.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TypeVar

from tests.support.cql_server.errors import ProtocolViolation

__all__ = ["Position", "paginate", "descending"]

Position = tuple[int, bytes, bytes]
T = TypeVar("T")
_MAGIC = b"cqltd1"
_HEAD = struct.Struct(">iqI")


def descending(key: bytes) -> bytes:
    """Bytes that sort in the reverse order of ``key`` among complete (prefix-free) encoded keys."""
    return bytes(255 - b for b in key)


def _encode(returned: int, pos: Position) -> bytes:
    token, routing, clustering = pos
    return _MAGIC + _HEAD.pack(returned, token, len(routing)) + routing + clustering


def _decode(raw: bytes) -> tuple[int, Position]:
    try:
        if not raw.startswith(_MAGIC):
            raise ValueError("not a paging state of this server")
        returned, token, n = _HEAD.unpack_from(raw, len(_MAGIC))
        body = raw[len(_MAGIC) + _HEAD.size :]
        if n > len(body):
            raise ValueError("truncated")
        return returned, (token, body[:n], body[n:])
    except (ValueError, struct.error) as exc:
        raise ProtocolViolation(f"Invalid value for the paging state: {exc}") from exc


def paginate(
    items: Sequence[tuple[Position, T]], page_size: int | None, state: bytes | None, limit: int | None
) -> tuple[list[T], bytes | None]:
    """The next page of ``items`` (sorted by position) and the state for the page after it (None: last)."""
    returned, after = (0, None) if state is None else _decode(state)
    rest = [it for it in items if after is None or it[0] > after]
    if limit is not None:
        rest = rest[: max(0, limit - returned)]
    if page_size is None or len(rest) <= page_size:
        return [payload for _, payload in rest], None
    page = rest[:page_size]
    return [payload for _, payload in page], _encode(returned + len(page), page[-1][0])
