"""Probing a down destination: recovery within a probe interval, not after a grown back-off.

The process callback is an in-memory sink that fails every attempt while its destination is
"down" (``SinkFailure`` on the sink ``index``); the probe is a flag, or a real Elasticsearch
adapter on a port nothing listens on. The worker's ``EnsuredIndex`` is driven by an index
whose ``ensure_index`` fails until the test lets it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from examples.support_desk.app import app as desk_app
from framework.local_stack import free_port
from framework.runtime.backoff import BackoffConfig
from framework.runtime.errors import SinkFailure
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.work import Work
from framework.settings import Settings
from framework.worker import resources as resources_module
from framework.worker.resources import EnsuredIndex, IndexNotEnsured, Resources
from stores.base import BulkResult, IndexOp, SearchHit, SearchIndex
from stores.elasticsearch.index import ElasticsearchIndex
from stores.errors import TransientStoreError

#: Outage back-off that grows to a long cap: without probing, recovery would wait for it.
SLOW = BackoffConfig(
    down_base_delay=2.0, down_max_delay=30.0, base_delay=0.01, max_delay=0.05, min_samples=3,
    down_min_keys=3, park_after=3, probe_interval=0.05, probe_timeout=0.2,
)  # fmt: skip


class Destination:
    """A sink that fails while ``down``; counts attempts and probes."""

    def __init__(self) -> None:
        self.down = True
        self.answers = False  # what a probe says (True while down: a probe that lies)
        self.attempts = 0
        self.probes = 0
        self.done: list[tuple[Hashable, int]] = []

    async def process(self, w: Work) -> None:
        await asyncio.sleep(0)
        self.attempts += 1
        if self.down:
            raise SinkFailure("index", TransientStoreError("connection refused"))
        self.done.append((w.tp, w.offset))

    async def probe(self) -> bool:
        self.probes += 1
        return self.answers or not self.down

    def back(self) -> None:
        self.down, self.answers = False, True


async def _never_park(w: Work, exc: BaseException) -> None:  # pragma: no cover - must not happen
    raise AssertionError(f"parked {w.tp}@{w.offset}: {exc!r}")


def _scheduler(dest: Destination, *, probe: bool = True, **kw: Any) -> tuple[KeyedScheduler, list[str]]:
    events: list[str] = []
    sched = KeyedScheduler(
        dest.process, _never_park, config=SchedulerConfig(backoff=SLOW, **kw),
        pause=lambda tp: events.append(f"pause {tp}"), resume=lambda tp: events.append(f"resume {tp}"),
        probes={"index": dest.probe} if probe else {},
    )  # fmt: skip
    return sched, events


def _submit(sched: KeyedScheduler, acked: list[tuple[Hashable, int]], parts: int = 4, keys: int = 5) -> None:
    for p in range(parts):
        for i in range(keys * 2):  # two events per key: the second waits behind the blocked first
            sched.submit(
                Work(f"p{p}", i, b"k%d" % (i % keys), b"", ack=lambda p=p, i=i: acked.append((p, i)))
            )


async def _until(pred: Any, timeout: float) -> float:
    started = time.monotonic()
    while not pred():
        assert time.monotonic() - started < timeout, "timed out"
        await asyncio.sleep(0.005)
    return time.monotonic() - started


def test_a_probe_answer_resumes_every_partition_and_retries_every_blocked_key_at_once() -> None:
    """A long outage: the blocked keys' delays grew to the cap (seconds); the sink comes back and
    every partition resumes and every key finishes within a few probe intervals."""

    async def main() -> None:
        dest = Destination()
        sched, events = _scheduler(dest)
        acked: list[tuple[Hashable, int]] = []
        _submit(sched, acked)
        await _until(lambda: sched.outage, 2)
        assert {e for e in events if e.startswith("pause")} == {f"pause p{p}" for p in range(4)}
        await asyncio.sleep(0.3)  # the keys sleep out delays of seconds; the probe keeps asking
        assert dest.probes >= 3 and not dest.done
        dest.back()
        took = await _until(lambda: len(acked) == 40, 2)
        assert took < 0.5, took  # a probe interval or two, not the 2-30 s back-off
        assert not sched.outage and {f"resume p{p}" for p in range(4)} <= set(events)
        for p in range(4):  # acknowledged in offset order per partition
            assert [i for q, i in acked if q == p] == list(range(10))
        status = sched.status()["sinks"]["index"]
        assert status["down"] is False and status["probe"]["answered"] >= 1
        await sched.close()

    asyncio.run(main())


def test_a_probe_that_answers_while_writes_fail_wakes_one_key_at_a_time() -> None:
    """A health answer is only a hint: one blocked key retries as the confirming attempt; its
    failure keeps the outage (no herd of retries at every probe), and nothing is parked."""

    async def main() -> None:
        dest = Destination()
        sched, _ = _scheduler(dest)
        _submit(sched, [], parts=2, keys=10)
        await _until(lambda: sched.outage, 2)
        await asyncio.sleep(0.1)
        before, probes = dest.attempts, dest.probes
        dest.answers = True  # answers HEAD /, refuses writes
        await asyncio.sleep(0.5)
        woken = dest.attempts - before
        probed = dest.probes - probes
        assert sched.outage and probed >= 3
        assert woken <= probed + 1, (woken, probed)  # at most one attempt per answered probe
        assert woken < 20  # not every one of the 20 blocked keys at each answer
        dest.down = False
        await _until(lambda: not sched.outage and sched.counters.acked == 40, 2)
        assert sched.counters.parked == 0
        await sched.close()

    asyncio.run(main())


def test_without_a_probe_the_first_success_wakes_every_other_blocked_key() -> None:
    """No probe for the sink: a blocked key's own retry is the probe; when it gets through, the
    other keys do not sleep out their delays."""

    async def main() -> None:
        dest = Destination()
        cfg = BackoffConfig(down_base_delay=0.05, down_max_delay=0.05, min_samples=3, down_min_keys=3)
        sched = KeyedScheduler(dest.process, _never_park, config=SchedulerConfig(backoff=cfg), probes={})
        acked: list[tuple[Hashable, int]] = []
        _submit(sched, acked, parts=2)
        await _until(lambda: sched.outage, 2)
        # from now on the keys sleep 30 s: only the one retry that succeeds below may wake them
        sched.backoff.config = BackoffConfig(down_base_delay=30.0, down_max_delay=30.0)
        await asyncio.sleep(0.2)  # every key failed again, now sleeping 15-30 s
        dest.down = False
        first = next(iter(sched._sleepers["index"]))  # noqa: SLF001 - one key's timer goes off
        sched._wake("index", "timer", one=True)  # noqa: SLF001
        took = await _until(lambda: len(acked) == 20, 2)
        assert took < 0.5 and first is not None and not sched.outage
        await sched.close()

    asyncio.run(main())


def test_after_a_recovery_a_key_starts_a_fresh_back_off_and_is_not_parked_at_once() -> None:
    """A key retried many times during an outage fails once more right after the sink came back,
    while other keys get through: it is retried after the short base delay, not parked on the
    attempts of the outage (past ``park_after``), nor delayed by the outage's grown back-off."""

    async def main() -> None:
        dest = Destination()
        flaky_left = {"n": 1}
        parked: list[int] = []

        async def process(w: Work) -> None:
            if dest.done and w.key == b"k5" and flaky_left["n"] > 0:  # after another key got through
                flaky_left["n"] -= 1
                raise SinkFailure("index", TransientStoreError("503 while starting"))
            await dest.process(w)

        async def park(w: Work, exc: BaseException) -> None:
            parked.append(w.offset)

        quick = BackoffConfig(down_base_delay=0.02, down_max_delay=30.0, base_delay=0.01, max_delay=0.05,
                              min_samples=3, down_min_keys=3, park_after=3, probe_interval=0.05)  # fmt: skip
        sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=quick),
                               probes={"index": dest.probe})  # fmt: skip
        acked: list[tuple[Hashable, int]] = []
        _submit(sched, acked, parts=1, keys=6)
        await _until(lambda: sched.outage, 2)
        await asyncio.sleep(0.6)
        blocked = sched.failures.part("p0").failed
        assert min(b.attempts for b in blocked.values()) > 3  # past park_after during the outage
        dest.back()
        took = await _until(lambda: len(acked) == 12, 2)
        assert took < 0.5 and parked == [] and flaky_left["n"] == 0
        await sched.close()

    asyncio.run(main())


def test_a_failing_or_hanging_probe_counts_as_no_answer_and_close_stops_probing() -> None:
    async def main() -> None:
        dest = Destination()
        calls = {"n": 0}

        async def bad_probe() -> bool:
            calls["n"] += 1
            if calls["n"] % 2:
                raise OSError("connection refused")
            await asyncio.sleep(10)  # hangs: cut at probe_timeout
            return True

        sched = KeyedScheduler(dest.process, _never_park, config=SchedulerConfig(backoff=SLOW),
                               probes={"index": bad_probe})  # fmt: skip
        _submit(sched, [], parts=1)
        await _until(lambda: sched.outage and calls["n"] >= 3, 3)
        assert sched.outage and sched.counters.crashes == 0
        stats = sched.status()["sinks"]["index"]["probe"]
        assert stats["probes"] >= 3 and stats["answered"] == 0
        prober = sched._prober  # noqa: SLF001
        await sched.close()
        assert prober is not None and prober.done()

    asyncio.run(main())


def test_the_elasticsearch_probe_is_false_fast_when_nothing_listens() -> None:
    async def main() -> None:
        index = ElasticsearchIndex(f"http://127.0.0.1:{free_port()}")
        try:
            started = time.monotonic()
            assert await index.answers(timeout=1.0) is False
            assert time.monotonic() - started < 1.5
        finally:
            await index.close()

    asyncio.run(main())


class _LateIndex(SearchIndex):
    """An index whose cluster answers only once ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.ensured: list[str] = []
        self.written: list[str] = []

    async def answers(self, timeout: float = 1.0) -> bool:
        return self.up

    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        if not self.up:
            raise TransientStoreError(f"ensure_index {alias}-v{generation}: connection failed")
        self.ensured.append(alias)
        return f"{alias}-v{generation}"

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        self.written.append(doc_id)
        return True

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        return True

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        self.written += [op.doc_id for op in ops]
        return BulkResult([])

    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        return None

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        return []

    async def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        hits: list[SearchHit] = []
        for hit in hits:
            yield hit

    async def refresh(self, alias: str) -> None:
        return None

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        return []

    async def close(self) -> None:
        return None


def test_resources_open_while_the_index_is_down_and_ensure_it_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ensure_index fails transiently at start: ``open`` returns, every request on the alias
    fails transiently (the projector blocks, nothing is parked) and the probe says no, until the
    cluster answers; then the index is ensured in the background and writes go through."""
    late = _LateIndex()
    monkeypatch.setattr(resources_module, "open_search_index", lambda url, tombstones: late)
    settings = Settings.resolve(
        desk_app.name, env={}, data_dir=str(tmp_path), wide_store=f"sqlite:///{tmp_path / 'wide.db'}",
        es_url="http://127.0.0.1:1",
    )  # fmt: skip
    alias = desk_app.projections[0].alias

    async def main() -> None:
        resources = Resources(desk_app, settings)
        await resources.open()  # does not raise
        try:
            index = resources.index
            assert isinstance(index, EnsuredIndex) and not resources.index_ready
            with pytest.raises(IndexNotEnsured):
                await index.bulk(alias, [IndexOp("t1", 1, {"a": 1})])
            with pytest.raises(TransientStoreError):  # the runtime retries it
                await index.get(alias, "t1")
            assert not await index.answers()
            late.up = True
            interval = desk_app.runtime.scheduler.backoff.probe_interval
            await _until(lambda: resources.index_ready, interval * 4 + 1)
            assert late.ensured == [p.alias for p in desk_app.projections]
            assert await index.answers()
            await index.bulk(alias, [IndexOp("t1", 1, {"a": 1})])
            assert late.written == ["t1"] and index.up is True  # other attributes are the inner's
        finally:
            await resources.close()

    asyncio.run(main())


def test_resources_close_stops_the_background_ensure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    late = _LateIndex()
    monkeypatch.setattr(resources_module, "open_search_index", lambda url, tombstones: late)
    settings = Settings.resolve(
        desk_app.name, env={}, data_dir=str(tmp_path), wide_store=f"sqlite:///{tmp_path / 'wide.db'}",
        es_url="http://127.0.0.1:1",
    )  # fmt: skip

    async def main() -> None:
        resources = Resources(desk_app, settings)
        await resources.open()
        task = resources._ensuring  # noqa: SLF001
        assert task is not None and not task.done()
        await resources.close()
        assert task.done() and not late.ensured

    asyncio.run(main())
