"""Sink latency (timed in ``processor.bounded``) and micro-batch sizes (``ObservedCounters``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from framework.metrics.observers import SINK_LATENCY, ObservedCounters, time_sinks
from framework.runtime import processor
from framework.runtime.counters import Counters
from framework.runtime.errors import MessageError, SinkFailure
from stores.errors import TransientStoreError


@pytest.fixture()
def timed() -> Iterator[None]:
    before = processor.sink_timer
    time_sinks()
    yield
    processor.sink_timer = before


def _count(sink: str) -> float:
    samples = {(s.name, s.labels.get("le")): s.value for m in SINK_LATENCY.collect() for s in m.samples
               if s.labels.get("sink") == sink}  # fmt: skip
    return samples.get((f"{SINK_LATENCY._name}_count", None), 0.0)


def _sum(sink: str) -> float:
    return next(s.value for m in SINK_LATENCY.collect() for s in m.samples
                if s.labels.get("sink") == sink and s.name.endswith("_sum"))  # fmt: skip


async def _fails(exc: BaseException) -> None:
    await asyncio.sleep(0.001)
    raise exc


def test_every_sink_call_is_timed_also_failed_and_timed_out_ones(timed: None) -> None:
    async def calls() -> None:
        assert await processor.bounded("probe_ok", 1.0, asyncio.sleep(0.02, "done")) == "done"
        with pytest.raises(SinkFailure):
            await processor.bounded("probe_io", 1.0, _fails(TransientStoreError("connection reset")))
        with pytest.raises(MessageError):
            await processor.bounded("probe_bad", 1.0, _fails(ValueError("not storable")))
        with pytest.raises(SinkFailure):
            await processor.bounded("probe_slow", 0.01, asyncio.sleep(5))

    asyncio.run(calls())
    assert [_count(s) for s in ("probe_ok", "probe_io", "probe_bad", "probe_slow")] == [1, 1, 1, 1]
    assert _sum("probe_ok") >= 0.02
    assert 0.01 <= _sum("probe_slow") < 1.0  # the timeout's, not the call's 5 s


def test_without_a_timer_nothing_is_observed() -> None:
    before, processor.sink_timer = processor.sink_timer, None
    try:
        asyncio.run(processor.bounded("probe_untimed", 1.0, asyncio.sleep(0)))
    finally:
        processor.sink_timer = before
    assert _count("probe_untimed") == 0


def test_observed_counters_report_each_batch_and_snapshot_like_counters() -> None:
    sizes: list[int] = []
    counters = ObservedCounters(sizes.append, received=3)
    assert sizes == []  # setting the initial value reports nothing
    for n in (500, 12, 1):
        counters.batches += 1
        counters.last_batch_size = n
    counters.received += 1
    assert sizes == [500, 12, 1]
    plain = Counters(received=4, batches=3, last_batch_size=1)
    assert counters.snapshot() == plain.snapshot()
