"""Property: every changed key reaches every consumer, however late its entry is written (issue 22).

Writers of one real SQLite store, in simulated time: stream workers (the support desk app's
store sink, ``store_sink``) and batch jobs (the activity platform app's ``write_notifications``,
the backfill's step; the ingestion job's step stamps through the same ``write_stamped``) whose
store step lands and whose notification step then crashes before or after writing, and is
redone later. Every write may land long after it started
(``SlowStore``, a test double around the real store: no store can be told to be slow), and every
writer's clock may be behind the readers' by less than ``settle - late_after``, the rule's bound.
Several consumers (``NotificationReader``, checkpoints in a real SQLite checkpoint store) read
small pages and commit at random moments. Model, written here: the set of row keys every
writer's batches changed. At the end every consumer has read all of them.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.activity_platform.app import app as activity_platform
from examples.support_desk.app import app as support_desk
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.events import Event
from framework.core.mutations import Mutation, Upsert
from framework.notifications import NOTIFICATION_TABLES, NotificationReader
from framework.notifications.sink import store_sink, write_notifications
from stores.sqlite import SqliteStore
from tests.notifications.test_sink import TICKETS

SETTLE = 30.0  # the reader's default
START = 1_700_000_000.0
assert support_desk.notifications is not None and activity_platform.notifications is not None
LATE_AFTER = max(support_desk.notifications.late_after, activity_platform.notifications.late_after)
CONSUMERS = ("c0", "c1", "c2")
#: tmpfs when the machine has one: the stores' fsyncs cost nothing there
FAST = "/dev/shm" if os.path.isdir("/dev/shm") else None


class Sim:
    """Simulated time (epoch seconds) and the writes waiting to land."""

    def __init__(self) -> None:
        self.now = START
        self.waiting: list[tuple[float, int, asyncio.Event]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self._seq = 0

    def wait(self, delay: float) -> asyncio.Event:
        gate = asyncio.Event()
        self._seq += 1
        self.waiting.append((self.now + delay, self._seq, gate))
        return gate

    async def quiet(self) -> None:
        """Until every writer task is done or waiting for its write to land."""
        for _ in range(100_000):
            for t in self.tasks:
                if t.done():
                    t.result()  # a writer's error fails the example
            if sum(not t.done() for t in self.tasks) == len(self.waiting):
                return
            await asyncio.sleep(0.0002)
        raise AssertionError("writers never settled")

    async def advance(self, seconds: float) -> None:
        """Move time on, landing every write due by then in order."""
        end = self.now + seconds
        while True:
            await self.quiet()
            due = sorted(w for w in self.waiting if w[0] <= end)
            if not due:
                break
            at, _, gate = due[0]
            self.waiting.remove(due[0])
            self.now = max(self.now, at)
            gate.set()
        self.now = end


class SlowStore:
    """The real store whose ``apply`` lands ``delays`` simulated seconds after it is called (0 once
    they run out)."""

    def __init__(self, inner: SqliteStore, sim: Sim, delays: Sequence[float]) -> None:
        self.inner, self.sim, self.delays = inner, sim, iter(delays)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        delay = next(self.delays, 0.0)
        if delay > 0:
            await self.sim.wait(delay).wait()
        await self.inner.apply(mutations)


keys = st.lists(st.tuples(st.sampled_from(["o1", "o2", "o3"]), st.integers(0, 30)), min_size=1, max_size=4)
delays = st.lists(st.sampled_from([0.0, 1.0, 9.0, 25.0, 45.0, 45.0, 120.0]), max_size=3)
skew = st.sampled_from([0.0, 0.0, 5.0, SETTLE - LATE_AFTER - 0.5])
tick = st.tuples(st.just("tick"), st.sampled_from([0.5, 3.0, 11.0, 31.0, 31.0, 40.0, 70.0]))
read = st.tuples(st.just("read"), st.sampled_from(CONSUMERS))
steps = st.lists(
    st.one_of(
        st.tuples(st.just("stream"), keys, delays, skew),
        st.tuples(st.just("job"), keys, delays, skew, st.sampled_from(["none", "before", "after"])),
        tick,
        read,
        st.tuples(st.just("redo")),
        tick,
        read,
    ),
    min_size=1,
    max_size=20,
)


def _upserts(rows: Sequence[tuple[str, int]], n: int) -> list[Mutation]:
    """Step ``n``'s rows: ids of its own, so a batch whose entry is lost is missed, not masked."""
    return [Upsert(TICKETS.name, {"org_id": o, "id": f"{n}.{i}"}, {"subject": "s"}, n + 1) for o, i in rows]


async def _scenario(
    root: Path, plan: Sequence[tuple[Any, ...]]
) -> tuple[set[tuple[str, str]], dict[str, set[Any]]]:
    sim = Sim()
    store = SqliteStore(root / "wide.db", clock=lambda: sim.now)
    cps = SqliteCheckpointStore(root / "checkpoints.db")
    for schema in (*NOTIFICATION_TABLES, TICKETS):
        await store.ensure_table(schema)
    changed: set[tuple[str, str]] = set()
    read: dict[str, set[Any]] = {c: set() for c in CONSUMERS}
    crashed: list[tuple[str, list[Mutation], float]] = []
    readers = {c: NotificationReader(store, cps, c, settle=SETTLE, clock=lambda: sim.now) for c in CONSUMERS}

    def clock_of(behind: float) -> Any:
        return lambda: sim.now - behind

    async def consume(name: str) -> None:
        reader = readers[name]
        while page := await reader.read(limit=3):
            read[name].update(
                (k["org_id"], k["id"]) for e in page if e.table == TICKETS.name for k in e.keys or ()
            )
            assert not any(e.reread for e in page)
            await reader.commit(page)

    def notify(batch: str, written: list[Mutation], delay: Sequence[float], behind: float) -> None:
        slow = SlowStore(store, sim, delay)
        sim.tasks.append(asyncio.create_task(
            write_notifications(slow, activity_platform, batch, written, clock_of(behind))  # type: ignore[arg-type]
        ))  # fmt: skip

    try:
        for n, step in enumerate(plan):
            if step[0] == "stream":
                _, rows, delay, behind = step
                sink = store_sink(support_desk, "tickets", SlowStore(store, sim, delay), clock_of(behind))  # type: ignore[arg-type]
                event = Event(f"e{n}", "k", n + 1, n + 1, "t", {})
                sim.tasks.append(asyncio.create_task(sink.write_batch([(event, _upserts(rows, n))])))
                changed.update((o, f"{n}.{i}") for o, i in rows)
            elif step[0] == "job":
                _, rows, delay, behind, crash = step
                written = _upserts(rows, n)
                await store.apply(written)  # the store step
                changed.update((o, f"{n}.{i}") for o, i in rows)
                if crash != "before":
                    notify(f"job/{n}", written, delay, behind)
                if crash != "none":  # redone by a later run, whatever the first one wrote
                    crashed.append((f"job/{n}", written, behind))
            elif step[0] == "tick":  # consumers poll: c0 and c1 after every tick, c2 only when told
                await sim.advance(step[1])
                for name in CONSUMERS[:2]:
                    await consume(name)
            elif step[0] == "read":
                await sim.quiet()
                await consume(step[1])
            elif step[0] == "redo":
                await sim.quiet()
                for batch, written, behind in crashed:
                    notify(batch, written, (), behind)
                crashed.clear()
        await sim.quiet()
        for batch, written, behind in crashed:
            notify(batch, written, (), behind)
        await sim.advance(1000.0)  # every write landed, later than any settle
        await sim.quiet()
        assert all(t.done() for t in sim.tasks) and not sim.waiting
        for name in CONSUMERS:
            await consume(name)
        return changed, read
    finally:
        for t in sim.tasks:
            t.cancel()
        cps.close_sync()
        await store.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
def test_every_changed_key_reaches_every_consumer(plan: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(dir=FAST) as tmp:
        changed, read = asyncio.run(_scenario(Path(tmp), plan))
    for name in CONSUMERS:
        assert read[name] == changed, name


def _plans() -> Iterator[list[tuple[Any, ...]]]:
    """The issue's cases, each as a plan: a redone batch, a slow write, a clock behind."""
    yield [("job", [("o1", 1)], [], 0.0, "before"), ("tick", 31.0), ("stream", [("o2", 2)], [], 0.0),
           ("tick", 31.0), ("read", "c0"), ("redo",), ("tick", 70.0), ("read", "c0")]  # fmt: skip
    yield [("stream", [("o1", 1)], [45.0], 0.0), ("tick", 3.0), ("stream", [("o2", 2)], [], 0.0),
           ("tick", 31.0), ("read", "c1")]  # fmt: skip
    yield [("job", [("o3", 3)], [9.0], SETTLE - LATE_AFTER - 0.5, "none"), ("tick", 0.5),
           ("stream", [("o2", 2)], [], 0.0), ("tick", 31.0), ("read", "c2"),
           ("tick", 11.0), ("read", "c2")]  # fmt: skip


def test_the_issues_cases() -> None:
    for plan in _plans():
        with tempfile.TemporaryDirectory(dir=FAST) as tmp:
            changed, read = asyncio.run(_scenario(Path(tmp), plan))
        assert changed and all(read[c] == changed for c in CONSUMERS), plan
