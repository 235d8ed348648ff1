"""The bound writes of one ``apply`` as requests: one UNLOGGED batch per partition, capped in size.

A batch whose statements all write one partition of one table is applied as
one mutation by that partition's replicas (unlogged: no batch log), so it costs
one round trip instead of one per write and has exactly the effect of the
single statements: every statement keeps its own ``USING TIMESTAMP`` and TTL, and the cell
rules decide as before. A batch never spans partitions. The partition is the
driver's routing key of the bound statement (the serialised partition key, as
the server hashes it); a write without one is sent alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.query import BatchStatement, BatchType

__all__ = ["MAX_BATCH_STATEMENTS", "Request", "partition_groups", "requests"]

#: The protocol counts a batch's statements in an unsigned short.
MAX_BATCH_STATEMENTS = 0xFFFF


@dataclass(frozen=True)
class Request:
    """One request to send: a bound statement or an UNLOGGED batch, and how many writes it carries."""

    statement: Any
    writes: int
    what: str


def partition_groups(tables: Sequence[str], bound: Sequence[Any]) -> list[list[int]]:
    """Indexes of ``bound`` grouped by (table, routing key), in first-seen order; no key = alone."""
    groups: dict[tuple[str, bytes], list[int]] = {}
    alone: list[list[int]] = []
    for i, (table, statement) in enumerate(zip(tables, bound, strict=True)):
        key = getattr(statement, "routing_key", None)
        if key is None:
            alone.append([i])
        else:
            groups.setdefault((table, key), []).append(i)
    return [*groups.values(), *alone]


def requests(
    tables: Sequence[str],
    bound: Sequence[Any],
    whats: Sequence[str],
    *,
    consistency: int,
    max_statements: int,
) -> list[Request]:
    """The requests for ``bound``: per partition, chunks of at most ``max_statements`` writes.

    A chunk of one write is its bound statement; a larger one is an idempotent
    UNLOGGED batch at ``consistency``. ``max_statements=1`` gives one request per write.
    """
    if not 1 <= max_statements <= MAX_BATCH_STATEMENTS:
        raise ValueError(f"max_statements must be in [1, {MAX_BATCH_STATEMENTS}], got {max_statements}")
    out: list[Request] = []
    for group in partition_groups(tables, bound):
        for start in range(0, len(group), max_statements):
            chunk = group[start : start + max_statements]
            if len(chunk) == 1:
                out.append(Request(bound[chunk[0]], 1, whats[chunk[0]]))
                continue
            batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=consistency)
            batch.is_idempotent = True  # every write carries its own timestamp: replaying it changes nothing
            for i in chunk:
                batch.add(bound[i])
            table = tables[chunk[0]]
            out.append(Request(batch, len(chunk), f"unlogged batch of {len(chunk)} writes to {table}"))
    return out
