"""ConvergeCollector: a runtime's status (a real KeyedScheduler's, or a given dict) as metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from faust.types import TP
from prometheus_client import CollectorRegistry, generate_latest

from framework.metrics import ConvergeCollector, PartitionOffsets, Snapshot
from framework.metrics.snapshot import split_tp
from framework.runtime.backoff import BackoffConfig
from framework.runtime.errors import SinkFailure
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.work import Work
from stores.errors import TransientStoreError

FAST = BackoffConfig(base_delay=0.001, max_delay=0.002, park_after=1000)


def _registry(snap: Snapshot) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConvergeCollector(lambda: snap))
    return registry


async def _blocked_scheduler_status() -> dict[str, Any]:
    """Key ``a`` of partition orders/0 keeps failing in its sink; ``b`` and ``c`` go through."""

    async def process(work: Work) -> None:
        if work.key == b"a":
            raise SinkFailure("wide_column", TransientStoreError("connection refused"))

    async def park(work: Work, exc: BaseException) -> None:
        raise AssertionError(f"nothing is parked here: {work} {exc!r}")

    sched = KeyedScheduler(process, park, config=SchedulerConfig(backoff=FAST))
    tp = TP("orders", 0)
    for offset, key in enumerate([b"a", b"b", b"a", b"a", b"c"]):
        sched.submit(Work(tp, offset, key, b"{}"))
    for _ in range(200):
        await asyncio.sleep(0.005)
        if sched.counters.processed == 2 and sched.counters.retried >= 3:
            break
    try:
        return sched.status()
    finally:
        await sched.close()


def test_a_blocked_key_and_its_skipped_queue_from_a_real_scheduler() -> None:
    status = asyncio.run(_blocked_scheduler_status())
    offsets = [PartitionOffsets("orders", "orders", 0, consumed=5, committed=0, end=5)]
    reg = _registry(Snapshot({"orders": status}, offsets))
    part = {"runtime": "orders", "topic": "orders", "partition": "0"}
    assert reg.get_sample_value("converge_partition_blocked_keys", part) == 1
    assert reg.get_sample_value("converge_partition_skipped", part) == 2  # offsets 2 and 3 wait behind 0
    assert reg.get_sample_value("converge_partition_pending", part) == 5  # 1 and 4 done, held behind 0
    assert reg.get_sample_value("converge_partition_paused", part) == 0
    assert reg.get_sample_value("converge_partition_lag", part) == 5
    assert reg.get_sample_value("converge_partition_consumed_offset", part) == 5
    assert reg.get_sample_value("converge_blocked_keys", {"runtime": "orders"}) == 1
    assert reg.get_sample_value("converge_in_flight", {"runtime": "orders"}) == 0
    assert reg.get_sample_value("converge_processed_total", {"runtime": "orders"}) == 2
    assert reg.get_sample_value("converge_acked_total", {"runtime": "orders"}) == 0
    assert reg.get_sample_value("converge_retried_total", {"runtime": "orders"}) >= 3
    sink = {"runtime": "orders", "sink": "wide_column"}
    assert reg.get_sample_value("converge_sink_down", sink) == 0
    assert reg.get_sample_value("converge_sink_recent_failures", sink) >= 3


STATUS = {
    "counters": {"received": 12, "processed": 9, "parked": 1, "in_flight": 2, "blocked_keys": 0,
                 "batch_fallbacks": 3, "some_new_total": 4, "last_batch_size": 7, "lag": 11},
    "partitions": {
        str(TP("tickets", 1)): {"pending": 2, "paused": True, "failed": {}, "skipped": 0},
    },
    "sinks": {
        "wide_column": {"down": False, "outages": 0, "recent_failures": 0},
        "index": {"down": True, "outages": 2, "recent_failures": 40},
    },
}  # fmt: skip


def test_counters_gauges_sinks_and_parked_from_a_status_dict() -> None:
    offsets = [
        PartitionOffsets("tickets", "tickets", 1, consumed=40, committed=30, end=45),
        PartitionOffsets("tickets", "tickets", 2, consumed=None, committed=None, end=3),
    ]
    parked = {("tickets", "parse", "EventError"): 1, ("tickets", "map", "UnknownEventType"): 4}
    reg = _registry(Snapshot({"tickets": STATUS, "project.tickets": {"counters": {"processed": 5}}},
                             offsets, parked))  # fmt: skip
    rt = {"runtime": "tickets"}
    assert reg.get_sample_value("converge_received_total", rt) == 12
    assert reg.get_sample_value("converge_batch_fallbacks_total", rt) == 3
    assert reg.get_sample_value("converge_some_new_total_total", rt) is None  # no double suffix
    assert reg.get_sample_value("converge_some_new_total", rt) == 4  # a counter it did not know
    assert reg.get_sample_value("converge_in_flight", rt) == 2
    assert reg.get_sample_value("converge_last_batch_size", rt) == 7
    assert reg.get_sample_value("converge_runtime_lag", rt) == 11
    assert reg.get_sample_value("converge_processed_total", {"runtime": "project.tickets"}) == 5
    p1 = {"runtime": "tickets", "topic": "tickets", "partition": "1"}
    assert reg.get_sample_value("converge_partition_committed_offset", p1) == 30
    assert reg.get_sample_value("converge_partition_end_offset", p1) == 45
    assert reg.get_sample_value("converge_partition_lag", p1) == 15
    assert reg.get_sample_value("converge_partition_paused", p1) == 1
    assert reg.get_sample_value("converge_partition_pending", p1) == 2
    p2 = {"runtime": "tickets", "topic": "tickets", "partition": "2"}
    assert reg.get_sample_value("converge_partition_end_offset", p2) == 3
    assert reg.get_sample_value("converge_partition_committed_offset", p2) is None  # not known yet
    assert reg.get_sample_value("converge_partition_lag", p2) is None
    assert reg.get_sample_value("converge_sink_down", {"runtime": "tickets", "sink": "index"}) == 1
    assert reg.get_sample_value("converge_sink_down", {"runtime": "tickets", "sink": "wide_column"}) == 0
    assert reg.get_sample_value("converge_sink_outages_total", {"runtime": "tickets", "sink": "index"}) == 2
    by = {"runtime": "tickets", "stage": "map", "error_class": "UnknownEventType"}
    assert reg.get_sample_value("converge_parked_events", by) == 4
    text = generate_latest(reg).decode()
    assert "# TYPE converge_parked_events gauge" in text and "# TYPE converge_received_total counter" in text


def test_partition_keys_split_into_topic_and_partition() -> None:
    assert split_tp(str(TP("support.tickets", 3))) == ("support.tickets", "3")
    assert split_tp(str(TopicPartition("orders", 12))) == ("orders", "12")
    assert split_tp("orders-7") == ("orders-7", "")  # another form: kept whole, never dropped
