"""A micro-batch taken before a rebalance that gives its partition back to the same worker.

The binding takes batch B2 from the stream while B1 is still being written; a whole
rebalance (revoke, then assign of the same partition) can finish during that wait. B2's
records are redelivered from the committed offset; B2 itself must not be tracked, or the
redelivery is dropped as a repeat and the partition never commits again (or faust commits
over the hole). Found in a 1 -> 2 -> 3 -> 2 -> 1 scale-out run of the demo app
(issue 23). The processor is a stand-in for a sink whose write can be held.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.runtime.batch import run_batch
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.work import Work

TP = ("changes", 4)


class HeldSink:
    """A batchable processor whose ``write_batch`` waits on ``gate`` when one is set."""

    name = "held"
    batchable = True

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.written: list[int] = []

    def prepare(self, work: Work) -> None:
        pass

    async def __call__(self, work: Work) -> None:
        self.written.append(work.offset)

    def map_batch(self, works: list[Work]) -> tuple[list[Any], list[Any]]:
        return [(w, None) for w in works], []

    async def write_batch(self, items: list[Any]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.written += [w.offset for w, _ in items]


async def _park(work: Work, exc: BaseException) -> None:
    raise AssertionError(f"nothing is bad here: {exc!r}")


def _works(sched: KeyedScheduler, acked: list[int], lo: int, hi: int) -> list[Work]:
    """Records ``lo..hi-1`` taken now, stamped with the partition's current epoch (as the binding does)."""
    return [
        Work(TP, o, b"k%d" % (o % 7), b"v", ack=lambda o=o: acked.append(o), epoch=sched.epoch(TP))
        for o in range(lo, hi)
    ]


async def test_a_batch_taken_before_a_rebalance_that_returned_its_partition_is_not_tracked() -> None:
    sink = HeldSink()
    sched = KeyedScheduler(sink, _park)
    acked: list[int] = []
    sched.assign({TP})
    committed = 100
    sink.gate = asyncio.Event()
    b1 = asyncio.ensure_future(run_batch(_works(sched, acked, 100, 150), sched, sink, _park))
    await asyncio.sleep(0)
    b2 = _works(sched, acked, 150, 200)  # the next batch, taken while b1 is written
    dropped = sched.revoke({TP})  # the rebalance, during b1's write
    sched.assign({TP})
    assert dropped == 50
    sink.gate.set()
    await b1  # its acks belong to the old ownership: ignored
    sink.gate = None
    await run_batch(b2, sched, sink, _park)
    # the consumer seeks back to the committed offset and delivers everything again
    await run_batch(_works(sched, acked, committed, 260), sched, sink, _park)

    assert sorted(acked) == list(range(committed, 260)), "acks must be the contiguous run from the commit"
    assert sched.counters.stale_dropped == len(b2)
    assert set(range(100, 260)) <= set(sink.written)


async def test_unstamped_work_is_taken_as_current() -> None:
    sink = HeldSink()
    sched = KeyedScheduler(sink, _park)
    acked: list[int] = []
    sched.assign({TP})
    await run_batch(
        [Work(TP, o, b"k", b"v", ack=lambda o=o: acked.append(o)) for o in range(5)], sched, sink, _park
    )
    assert acked == [0, 1, 2, 3, 4]
