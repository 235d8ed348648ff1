"""The calibration every benchmark prints first, and the bench events it is measured on.

``calibrate``: raw aiokafka consume + JSON decode of ``make_records`` on this machine's
noida-db, to compare figures taken on other machines (the calibration line). ``raw_measured``
is variant (a) of ``benchmarks.agent_throughput``: the same consume, timed and CPU-sampled
(``/proc``) from the first record to the last.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from benchmarks.proc_cpu import cpu_seconds
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack

#: The event times of ``make_records`` span this many days (one a record, round robin).
DAYS = 90
_DAY_US = 86_400_000_000


def make_records(n: int, keys: int) -> list[tuple[bytes, bytes]]:
    """``n`` bench events, event ``i`` keyed ``org{i % 17}:e{i % keys}`` at version base + ``i``; its
    time is day ``i % DAYS`` after a fixed start, so the times arrive out of order."""
    out = []
    for i in range(n):
        k = f"org{i % 17}:e{i % keys}"
        body = {"event_id": f"ev{i}", "ordering_key": k, "version": 1_700_000_000_000_000 + i,
                "occurred_at": 1_700_000_000_000_000 + (i % DAYS) * _DAY_US + i, "type": "bench",
                "payload": {"n": i, "body": "x" * 120}}  # fmt: skip
        out.append((k.encode(), json.dumps(body).encode()))
    return out


@dataclass(frozen=True)
class Measured:
    """One run: the events timed, its seconds and the CPU seconds of the process doing the work."""

    events: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        """Events per second."""
        return self.events / self.seconds

    @property
    def cpu_us(self) -> float:
        """CPU microseconds per event."""
        return self.cpu_s / self.events * 1e6


async def raw_measured(bootstrap: str, topic: str, n: int) -> Measured:
    """(a): consume and decode ``n`` records; timed and CPU-sampled from the first record to the last."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"raw-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    await consumer.start()
    try:
        seen, first, cpu = 0, 0.0, 0.0
        while seen < n:
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batches.values():
                if seen == 0 and records:
                    first, cpu = time.perf_counter(), cpu_seconds(os.getpid())
                for r in records:
                    json.loads(r.value)
                seen += len(records)
        return Measured(n, time.perf_counter() - first, cpu_seconds(os.getpid()) - cpu)
    finally:
        await consumer.stop()


async def raw_consume(bootstrap: str, topic: str, n: int) -> float:
    """(a)'s events/s."""
    return (await raw_measured(bootstrap, topic, n)).rate


def calibrate(work: Path, records: int) -> str:
    """The calibration line: raw aiokafka consume + JSON decode rate of ``records`` records."""
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {"calibration": 4}))
        asyncio.run(produce(broker, "calibration", make_records(records, 1_000)))
        rate = asyncio.run(raw_consume(stack.info.kafka_bootstrap, "calibration", records))
    return (f"calibration: raw aiokafka consume + JSON decode {rate:,.0f} ev/s ({records:,} records, "
            f"4 partitions, noida-db), nproc {os.cpu_count()}")  # fmt: skip
