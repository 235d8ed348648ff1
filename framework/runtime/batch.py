"""The batch path: a whole micro-batch mapped, merged and written with one call per sink.

Per-cell last write wins is associative, commutative and idempotent, so the
mutations of many events can be written together with exactly the effect of
writing them one by one, in any order. The runtime therefore runs every
message whose relation key has nothing waiting in the per-key path
(``KeyedScheduler``) as one batch:

1. each message is tracked for ordered acknowledgement;
2. the pure step maps them all; a bad message is parked (durable) and counts
   as finished, its key moves on;
3. every sink is written once for the batch, in the declared order;
4. on success every message is finished; the contiguous prefix is acked.

When any sink write of the batch fails (transient or not), nothing of it
counts as done: its messages go to the per-key path in offset order, which
retries, backs off, pauses on an outage and narrows a message-level failure
down to the one event it parks. The same happens while a sink is down.

``map_batch`` may be a coroutine (a processor that must first load state, as
``framework.state.JoinProcessor`` restores join state); it must not raise.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence

from framework.runtime.processor import Processor
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.work import Work

__all__ = ["run_batch"]

log = logging.getLogger(__name__)


async def run_batch(
    works: Sequence[Work],
    scheduler: KeyedScheduler,
    processor: Processor,
    park: Callable[[Work, BaseException], Awaitable[None]],
) -> None:
    """Run ``works`` (one micro-batch, in arrival order) by the batch path where it may, else
    by the per-key path."""
    if not processor.batchable or scheduler.outage:
        for work in works:
            scheduler.submit(work)
        return
    fast: list[tuple[Work, int]] = []
    for work in works:
        if scheduler.busy(work):
            scheduler.submit(work)  # behind earlier messages of its key
        elif (generation := scheduler.track(work)) is not None:
            fast.append((work, generation))
    if not fast:
        return
    generations = {id(w): g for w, g in fast}
    mapped = processor.map_batch([w for w, _ in fast])
    items, bad = await mapped if inspect.isawaitable(mapped) else mapped
    for work, exc in bad:
        try:
            await park(work, exc)
        except Exception as park_exc:  # noqa: BLE001 - the per-key path retries parking
            log.warning("could not park %s@%s (%r): retrying it alone", work.tp, work.offset, park_exc)
            scheduler.enqueue(work)
            continue
        scheduler.finish(work, generations[id(work)], parked=True)
    if not items:
        return
    try:
        await processor.write_batch(items)
    except Exception as exc:  # noqa: BLE001 - every failure of a batch goes to the per-key path
        scheduler.counters.batch_fallbacks += 1
        log.warning("batch of %d failed (%r): running its messages one key at a time", len(items), exc)
        for work, _ in items:
            if scheduler.current(work, generations[id(work)]):
                scheduler.enqueue(work)
        return
    scheduler.counters.batch_writes += 1
    scheduler.batch_written()
    scheduler.finish_written([work for work, _ in items], generations)
