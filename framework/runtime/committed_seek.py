"""Seeking to the committed offsets, also where there is none.

Faust drops the records it fetched while its flow was stopped (a rebalance)
and counts on a seek to the committed offsets to fetch them again. aiokafka's
``seek_to_committed`` only moves partitions whose committed offset is above 0:
one with no commit yet (a new group, or a rebalance before the first commit)
or a commit at 0 keeps its position past the dropped records, which are then
never delivered (seen: a broker restart before the worker's first commit; the
worker fetched to the end, delivered nothing and its lag never moved).

``seek_committed_everywhere`` replaces that step on the consumer thread: a
partition with a committed offset (0 included) is moved to it, one without is
reset by the consumer's ``auto_offset_reset`` policy, as on a first start.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["seek_committed_everywhere"]

log = logging.getLogger(__name__)

_MARK = "_converge_seeks_committed"


def seek_committed_everywhere(thread: Any) -> bool:
    """Replace ``seek_to_committed`` of Faust's aiokafka consumer thread (once); False when
    ``thread`` is not one."""
    if not hasattr(thread, "call_thread") or not hasattr(thread, "_ensure_consumer"):
        return False
    if getattr(thread, _MARK, False):
        return True

    async def seek_to_committed() -> dict[Any, int | None]:
        offsets: dict[Any, int | None] = await thread.call_thread(
            seek_committed,
            thread._ensure_consumer(),  # noqa: SLF001
        )
        return offsets

    thread.seek_to_committed = seek_to_committed
    setattr(thread, _MARK, True)
    return True


async def seek_committed(consumer: Any) -> dict[Any, int | None]:
    """Move every assigned partition of an aiokafka consumer to its committed offset, or
    reset it by the consumer's policy when it has none; returns the committed offsets."""
    committed: dict[Any, int | None] = {}
    missing = []
    for tp in consumer.assignment():
        offset = await consumer.committed(tp)
        committed[tp] = offset
        if offset is not None and offset >= 0:
            consumer.seek(tp, offset)
        else:
            missing.append(tp)
    policy = getattr(consumer, "_auto_offset_reset", "earliest")
    if missing and policy in ("earliest", "latest"):
        log.info("no committed offset for %d partitions: reset to the %s", len(missing), policy)
        reset = consumer.seek_to_beginning if policy == "earliest" else consumer.seek_to_end
        await reset(*missing)
    return committed
