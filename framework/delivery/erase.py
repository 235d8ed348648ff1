"""Removing a data subject's messages from the delivery ledger (``converge erase``).

The ledger holds message ids, sources and source locations, no payload; a
message belongs to a subject when its id or source names the subject, or its
id is one the erasure found among the subject's data (an event id of an
erased state-log row or parked record). Its ledger rows (origin and
retries) and its index row are deleted with row tombstones at
``MAX_VERSION``, so a late registration or acknowledgement of the same
message cannot bring them back.
"""

from __future__ import annotations

from collections.abc import Callable

from framework.core.mutations import MAX_VERSION, Delete, Mutation
from framework.delivery.model import LedgerConfig
from stores.base import WideColumnStore

__all__ = ["erase_messages"]

#: ``matches(message_id, source)``: True for a message of the subject.
MessageMatch = Callable[[str, str], bool]


async def erase_messages(
    store: WideColumnStore, config: LedgerConfig, matches: MessageMatch, *, dry_run: bool = False
) -> int:
    """Delete the ledger and index rows of every message ``matches`` selects (one scan of each
    table); returns how many ledger rows were deleted."""
    deletes: list[Mutation] = []
    rows = 0
    async for row in store.scan(config.table):
        if matches(str(row.key["message_id"]), str(row.key["source"])):
            deletes.append(Delete(config.table, dict(row.key), MAX_VERSION))
            rows += 1
    async for row in store.scan(config.index_table):
        source = row.values().get("source")
        if matches(str(row.key["message_id"]), "" if source is None else str(source)):
            deletes.append(Delete(config.index_table, dict(row.key), MAX_VERSION))
    if deletes and not dry_run:
        await store.apply(deletes)
    return rows
