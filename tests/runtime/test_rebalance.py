"""Rebalance safety of the KeyedScheduler: revoked work is dropped, never acked; a partition
assigned again restarts from its committed offset without tripping the offset order.

A simulated consumer stands in for Kafka (no broker: the live rebalance runs in
tests/integration): it hands out each partition's offsets from a position
that a new assignment resets to the committed offset, and it can hand out a
record of an older generation late, as a ``noack_take`` batch does after a
revocation. The intake drops records the way ``AgentRuntime`` does: of a
partition not owned, or of an older generation.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.runtime.backoff import BackoffConfig
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.work import Work

FAST = BackoffConfig(base_delay=0.0005, max_delay=0.002, down_base_delay=0.001, down_max_delay=0.004)
END = 12  # offsets per partition


def test_late_record_of_a_revoked_generation_never_crashes_nor_acks() -> None:
    """The issue's crash: offset 1357 taken before the revocation reaches the scheduler after
    it, then the partition comes back from its committed offset 1021."""

    async def main() -> None:
        acked: list[int] = []

        async def process(w: Work) -> None:
            await asyncio.sleep(0)

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover - nothing is bad
            raise AssertionError

        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST))
        sched.revoke({"p0"})
        assert not sched.owns("p0")
        sched.submit(Work("p0", 1357, b"k", b"", ack=lambda: acked.append(1357)))  # stale, late
        sched.assign({"p0"})
        assert sched.owns("p0")
        for off in (1021, 1022):
            sched.submit(Work("p0", off, b"k", b"", ack=lambda off=off: acked.append(off)))
        assert await sched.drain(timeout=2)
        assert acked == [1021, 1022]

    asyncio.run(main())


def test_a_record_delivered_again_below_the_last_offset_is_dropped_not_run() -> None:
    async def main() -> None:
        acked: list[int] = []
        ran: list[int] = []
        gate = asyncio.Event()

        async def process(w: Work) -> None:
            await gate.wait()
            ran.append(w.offset)

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover
            raise AssertionError

        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST))
        for off in (5, 6):
            sched.submit(Work("p0", off, b"k", b"", ack=lambda off=off: acked.append(off)))
        await asyncio.sleep(0.01)
        sched.submit(Work("p0", 5, b"k", b"", ack=lambda: acked.append(-5)))  # again, while pending
        gate.set()
        assert await sched.drain(timeout=2)
        assert acked == [5, 6] and ran == [5, 6] and sched.counters.stale_dropped == 1

    asyncio.run(main())


op = st.one_of(
    st.tuples(st.just("deliver"), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.just("late"), st.integers(0, 1), st.integers(0, END - 1)),
    st.tuples(st.just("revoke"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("assign"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("run"), st.just(0), st.integers(0, 3)),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(op, max_size=40), slow=st.sets(st.integers(0, END - 1), max_size=4))
def test_interleaved_revocations_never_ack_stale_work_and_lose_nothing(
    ops: list[tuple[str, int, int]], slow: set[int]
) -> None:
    async def main() -> None:
        generation = {0: 0, 1: 0}
        owned = {0: True, 1: True}
        position = {0: 0, 1: 0}
        committed = {0: 0, 1: 0}
        processed: dict[int, set[int]] = defaultdict(set)
        handed: dict[int, list[tuple[int, int]]] = defaultdict(list)  # (offset, generation)

        async def process(w: Work) -> None:
            await asyncio.sleep(0.002 if w.offset in slow else 0)
            processed[w.tp].add(w.offset)  # type: ignore[index]

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover - nothing is bad
            raise AssertionError

        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST, max_concurrency=3))

        def intake(tp: int, off: int, gen: int) -> None:
            if not sched.owns(tp) or gen != generation[tp]:  # what AgentRuntime._fresh drops
                return

            def ack() -> None:
                assert gen == generation[tp] and owned[tp], "acked work of a revoked generation"
                assert off == committed[tp], "acked out of offset order"
                committed[tp] = off + 1

            sched.submit(Work(tp, off, f"k{off % 3}".encode(), b"", ack=ack))

        def deliver(tp: int, n: int) -> None:
            for _ in range(n):
                if owned[tp] and position[tp] < END:
                    handed[tp].append((position[tp], generation[tp]))
                    intake(tp, position[tp], generation[tp])
                    position[tp] += 1

        for kind, tp, n in ops:
            if kind == "deliver":
                deliver(tp, n)
            elif kind == "late" and handed[tp]:
                off, gen = handed[tp][n % len(handed[tp])]
                intake(tp, off, gen)  # a record taken before a rebalance reaches the batch now
            elif kind == "revoke" and owned[tp]:
                owned[tp] = False
                sched.revoke({tp})
            elif kind == "assign" and not owned[tp]:
                owned[tp], generation[tp], position[tp] = True, generation[tp] + 1, committed[tp]
                sched.assign({tp})
            elif kind == "run":
                for _ in range(n + 1):
                    await asyncio.sleep(0.001)
        for tp in (0, 1):  # finally every partition is owned and read to the end
            if not owned[tp]:
                owned[tp], generation[tp], position[tp] = True, generation[tp] + 1, committed[tp]
                sched.assign({tp})
            deliver(tp, END)
        assert await sched.drain(timeout=5)
        await sched.close()
        assert committed == {0: END, 1: END}
        assert all(processed[tp] == set(range(END)) for tp in (0, 1))

    asyncio.run(main())
