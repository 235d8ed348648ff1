"""Removing erased rows' keys from existing notification entries (``converge erase``).

An entry lists the row keys a batch changed; after an erasure the keys of the
subject's rows must not stay in that history. ``scrub_keys`` rewrites the
``keys`` cell of every entry listing one of them without it, at the entry's
write time plus one (so a re-run of the original batch, which rewrites the
entry at its ingestion time, stays shadowed) and with the entry's remaining
time to live. Entries that say ``reread`` list no keys and stay as they are.
The erasure itself writes a new entry (``deleted``/``updated`` counts, the
erased keys) so consumers drop their copies; ``skip_batch`` keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from framework.core.mutations import CellValue, Mutation, Upsert
from framework.notifications.entries import decode_keys, encode_keys, key_ident
from framework.notifications.schema import NOTIFICATION_TABLE
from stores.base import WideColumnStore

__all__ = ["scrub_keys"]


async def scrub_keys(
    store: WideColumnStore,
    erased: Mapping[str, Iterable[Mapping[str, CellValue]]],
    now_s: float,
    *,
    skip_batch: Callable[[str], bool] = lambda batch_id: False,
    dry_run: bool = False,
) -> int:
    """Drop the keys in ``erased`` (row keys by table) from every entry listing them; returns how
    many entries changed (one scan of the notification table)."""
    wanted = {table: {key_ident(dict(k)) for k in keys} for table, keys in erased.items()}
    wanted = {t: ids for t, ids in wanted.items() if ids}
    if not wanted:
        return 0
    writes: list[Mutation] = []
    async for row in store.scan(NOTIFICATION_TABLE.name):
        ids = wanted.get(str(row.key["table_name"]))
        cell = row.cells.get("keys")
        if ids is None or cell is None or cell.value is None or skip_batch(str(row.key["batch_id"])):
            continue
        keys = decode_keys(str(cell.value))
        kept = [k for k in keys if key_ident(k) not in ids]
        if len(kept) == len(keys):
            continue
        ttl = None
        if cell.expires_at is not None:
            ttl = max(1, math.ceil(cell.expires_at - now_s))
        writes.append(Upsert(NOTIFICATION_TABLE.name, dict(row.key), {"keys": encode_keys(kept)},
                             cell.writetime + 1, ttl))  # fmt: skip
    if writes and not dry_run:
        await store.apply(writes)
    return len(writes)
