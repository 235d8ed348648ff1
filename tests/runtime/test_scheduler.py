"""KeyedScheduler: per-key order, at least once, acks never pass unfinished work.

The process callback is a scripted in-memory sink (no external part is
involved): each message declares how many transient failures it suffers, or
that it is poison.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.runtime.backoff import BackoffConfig
from framework.runtime.errors import MessageError
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.work import Work
from stores.errors import TransientStoreError

FAST = BackoffConfig(
    base_delay=0.0005, max_delay=0.002, down_base_delay=0.001, down_max_delay=0.004, park_after=50
)

message = st.tuples(
    st.integers(0, 1),  # partition
    st.sampled_from([b"a", b"b", b"c", b"d", None]),  # key
    st.integers(0, 3),  # transient failures before success
    st.booleans(),  # poison?
)


def _run(
    messages: list[tuple[int, bytes | None, int, bool]],
    concurrency: int,
    bound: int,
    backoff: BackoffConfig = FAST,
) -> None:
    """Feed ``messages``; with ``backoff.park_after`` above every failure count nothing but poison
    is parked, otherwise an event failing too often may be parked as a bad message."""

    async def main() -> None:
        applied: dict[tuple[int, bytes | None], list[int]] = defaultdict(list)
        parked: list[tuple[int, int]] = []
        acked: dict[int, list[int]] = defaultdict(list)
        finished: set[tuple[int, int]] = set()
        failures_left: dict[tuple[int, int], int] = {}
        poison: set[tuple[int, int]] = set()
        paused: set[int] = set()

        async def process(w: Work) -> None:
            await asyncio.sleep(0)
            ident = (w.tp, w.offset)
            if failures_left[ident] > 0:
                failures_left[ident] -= 1
                raise TransientStoreError("down")
            if ident in poison:
                raise MessageError("map", ValueError("poison"))
            applied[(w.tp, w.key)].append(w.offset)
            finished.add(ident)

        async def park(w: Work, exc: BaseException) -> None:
            assert isinstance(exc, MessageError)
            parked.append((w.tp, w.offset))
            finished.add((w.tp, w.offset))

        def make_ack(tp: int, off: int):
            def ack() -> None:
                # everything up to and including this offset is finished
                assert all((tp, o) in finished for o in offsets[tp] if o <= off)
                acked[tp].append(off)

            return ack

        sched = KeyedScheduler(
            process,
            park,
            config=SchedulerConfig(
                max_concurrency=concurrency, max_pending_per_partition=bound, backoff=backoff
            ),
            pause=paused.add,
            resume=paused.discard,
            crash=lambda exc: (_ for _ in ()).throw(AssertionError(f"crashed: {exc!r}")),
        )
        offsets: dict[int, list[int]] = defaultdict(list)
        expected_order: dict[tuple[int, bytes | None], list[int]] = defaultdict(list)
        for tp, key, fails, is_poison in messages:
            off = len(offsets[tp]) * 3 + 7  # sparse offsets, as after compaction
            offsets[tp].append(off)
            failures_left[(tp, off)] = fails
            if is_poison:
                poison.add((tp, off))
            else:
                expected_order[(tp, key)].append(off)
            sched.submit(Work(tp=tp, offset=off, key=key, value=b"{}", ack=make_ack(tp, off)))
            if len(offsets[tp]) % 5 == 0:
                await asyncio.sleep(0)
        assert await sched.drain(timeout=30)
        # every message applied or parked (never both), per-key order kept, acks every offset in order
        applied_ids = {(tp, o) for (tp, _), offs in applied.items() for o in offs}
        assert applied_ids.isdisjoint(parked) and len(set(parked)) == len(parked)
        assert applied_ids | set(parked) == {(tp, o) for tp, offs in offsets.items() for o in offs}
        assert poison <= set(parked)
        for lane, offs in applied.items():
            assert offs == [o for o in expected_order[lane] if (lane[0], o) not in parked]
        if backoff.park_after > 3:  # no event fails that often: only poison is parked
            assert sorted(parked) == sorted(poison)
        assert {tp: acked[tp] for tp in offsets} == dict(offsets)
        assert sched.counters.processed + sched.counters.parked == len(messages)
        assert not paused  # every pause was followed by a resume
        assert sched.counters.blocked_keys == 0

    asyncio.run(main())


@settings(max_examples=500, deadline=None)
@given(
    messages=st.lists(message, min_size=1, max_size=40),
    concurrency=st.integers(1, 8),
    bound=st.integers(2, 50),
)
def test_order_per_key_nothing_lost_acks_in_prefix(
    messages: list[tuple[int, bytes | None, int, bool]], concurrency: int, bound: int
) -> None:
    _run(messages, concurrency, bound)


def test_blocked_key_does_not_stop_other_keys_nor_let_the_commit_pass() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        done: list[bytes | None] = []
        acked: list[int] = []

        async def process(w: Work) -> None:
            if w.key == b"stuck" and not gate.is_set():
                raise TransientStoreError("destination down for this key")
            done.append(w.key)

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover - must not happen
            raise AssertionError("nothing is parked")

        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST))
        sched.submit(Work(0, 0, b"stuck", b"", ack=lambda: acked.append(0)))
        sched.submit(Work(0, 1, b"stuck", b"", ack=lambda: acked.append(1)))
        for i in range(2, 12):
            sched.submit(Work(0, i, b"other%d" % i, b"", ack=lambda i=i: acked.append(i)))
        assert not await sched.drain(timeout=0.3)
        assert len([k for k in done if k != b"stuck"]) == 10  # other keys went on
        assert acked == []  # the commit point stays at the blocked offset 0
        assert sched.counters.blocked_keys == 1
        gate.set()
        assert await sched.drain(timeout=5)
        assert acked == list(range(12))
        assert done[-2:] == [b"stuck", b"stuck"]

    asyncio.run(main())


def test_partition_paused_past_bound_and_resumed() -> None:
    async def main() -> None:
        release = asyncio.Event()
        events: list[str] = []

        async def process(w: Work) -> None:
            await release.wait()

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover
            raise AssertionError

        sched = KeyedScheduler(
            process,
            park,
            config=SchedulerConfig(max_pending_per_partition=4),
            pause=lambda tp: events.append(f"pause {tp}"),
            resume=lambda tp: events.append(f"resume {tp}"),
        )
        for i in range(6):
            sched.submit(Work("p0", i, b"k%d" % i, b""))
        sched.submit(Work("p1", 0, b"x", b""))
        assert events == ["pause p0"]
        release.set()
        assert await sched.drain(timeout=5)
        assert events == ["pause p0", "resume p0"]

    asyncio.run(main())


def test_revoke_drops_unfinished_work_without_acking() -> None:
    async def main() -> None:
        acked: list[int] = []

        async def process(w: Work) -> None:
            raise TransientStoreError("down")

        async def park(w: Work, exc: BaseException) -> None:  # pragma: no cover
            raise AssertionError

        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST))
        for i in range(3):
            sched.submit(Work("p0", i, b"k", b"", ack=lambda i=i: acked.append(i)))
        await asyncio.sleep(0.05)
        assert sched.revoke({"p0"}) == 3
        assert await sched.drain(timeout=1)
        assert acked == []

    asyncio.run(main())


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(
    messages=st.lists(
        st.tuples(
            st.integers(0, 1), st.sampled_from([b"a", b"b", b"c", None]), st.integers(0, 6), st.booleans()
        ),
        min_size=1,
        max_size=30,
    ),
    concurrency=st.integers(1, 6),
)
def test_adaptive_parking_loses_nothing(
    messages: list[tuple[int, bytes | None, int, bool]], concurrency: int
) -> None:
    """With parking after 3 attempts, every event is still applied or parked, in key order."""
    _run(messages, concurrency, 20, BackoffConfig(
        base_delay=0.0005, max_delay=0.002, down_base_delay=0.001, down_max_delay=0.004,
        park_after=3, min_samples=4, down_min_keys=2,
    ))  # fmt: skip
