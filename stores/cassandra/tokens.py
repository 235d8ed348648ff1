"""Murmur3 token ring arithmetic for sharded scans.

The Murmur3 partitioner places every partition on a signed 64-bit token in
``[MIN_TOKEN, MAX_TOKEN]``; no key hashes to ``MIN_TOKEN`` itself (Cassandra
and the driver normalise it to ``MAX_TOKEN``). Ranges here are inclusive
``(first, last)`` pairs that never wrap, so ``token(pk) >= first AND
token(pk) <= last`` selects exactly one of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from cassandra.metadata import Murmur3Token

__all__ = [
    "MIN_TOKEN",
    "MAX_TOKEN",
    "RING_SIZE",
    "shard_range",
    "shard_ranges",
    "unwrap",
    "ring_ranges",
    "token_of",
    "shard_of",
]

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
#: Number of distinct tokens on the ring.
RING_SIZE = 2**64


def _check_shard(shard: int, shards: int) -> None:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= RING_SIZE:
        raise ValueError(f"shards must be an integer in [1, 2**64], got {shards!r}")
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < shards:
        raise ValueError(f"shard must be an integer in [0, {shards}), got {shard!r}")


def shard_range(shard: int, shards: int) -> tuple[int, int]:
    """The inclusive token range of shard ``shard`` when the ring is cut into ``shards`` equal parts."""
    _check_shard(shard, shards)
    first = MIN_TOKEN + (shard * RING_SIZE) // shards
    last = MIN_TOKEN + ((shard + 1) * RING_SIZE) // shards - 1
    return first, last


def shard_ranges(shards: int) -> list[tuple[int, int]]:
    """All shard ranges in ring order; together they cover the ring exactly once."""
    _check_shard(0, shards)
    return [shard_range(i, shards) for i in range(shards)]


def unwrap(start_exclusive: int, end_inclusive: int) -> list[tuple[int, int]]:
    """Cassandra's range ``(start, end]`` as non-wrapping inclusive ranges.

    A range whose end is not after its start wraps past ``MAX_TOKEN``; when
    start equals end it is the whole ring.
    """
    for t in (start_exclusive, end_inclusive):
        if not MIN_TOKEN <= t <= MAX_TOKEN:
            raise ValueError(f"token {t} outside the Murmur3 range")
    if start_exclusive < end_inclusive:
        return [(start_exclusive + 1, end_inclusive)]
    out = []
    if start_exclusive < MAX_TOKEN:
        out.append((start_exclusive + 1, MAX_TOKEN))
    out.append((MIN_TOKEN, end_inclusive))
    return out


def ring_ranges(node_tokens: Iterable[int]) -> list[tuple[int, int]]:
    """The ranges owned by each node token (``(previous, token]``), unwrapped and sorted."""
    tokens = sorted(set(node_tokens))
    if not tokens:
        return [(MIN_TOKEN, MAX_TOKEN)]
    out: list[tuple[int, int]] = []
    for prev, tok in zip([tokens[-1], *tokens[:-1]], tokens, strict=True):
        out += unwrap(prev, tok)
    return sorted(out)


def token_of(routing_key: bytes) -> int:
    """The Murmur3 token of a serialised partition key (the driver's routing key)."""
    token: int = Murmur3Token.from_key(routing_key).value
    return token


def shard_of(token: int, shards: int) -> int:
    """The shard whose range holds ``token``."""
    _check_shard(0, shards)
    if not MIN_TOKEN <= token <= MAX_TOKEN:
        raise ValueError(f"token {token} outside the Murmur3 range")
    # Shard i starts at offset floor(i * R / n); the token's shard is the largest such i not
    # after its offset o, i.e. the largest i with i * R / n < o + 1.
    offset = token - MIN_TOKEN
    return ((offset + 1) * shards - 1) // RING_SIZE
