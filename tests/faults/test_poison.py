"""A poison corpus interleaved with valid events on the same keys, through a live worker of the
order test app: all poison parked with its stage and class, all valid events applied in key order."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.order_runs import ORDER_APP, applied_at, order_status, parked, tick_event
from tests.support.poison import poison_corpus

pytestmark = pytest.mark.faults

KEYS, PER_KEY = [f"p{i}" for i in range(10)], 30


def test_poison_corpus_is_parked_and_valid_events_apply_in_key_order(
    stack: StackInfo, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """Each poison message sits between two valid events of its key. Every poison is parked once
    with its stage and error class and before the next valid event of its key is applied; every
    valid event is applied once, in key order; the worker stays up and never pauses."""
    started = time.monotonic()
    rng = random.Random(fault_plan.seed)
    topic, group = f"poison-{uuid.uuid4().hex[:8]}", f"poison-app-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    corpus = poison_corpus(KEYS)
    before: dict[tuple[bytes, bytes], int] = {}  # poison -> the valid event n it precedes
    queue: dict[bytes, list[tuple[bytes, bytes]]] = defaultdict(list)
    for n in range(PER_KEY):
        for k in KEYS:
            queue[k.encode()].append((k.encode(), tick_event(k, n)))
    for p in corpus:
        lane = queue[p.key]
        at = rng.randint(1, len(lane) - 1) if p.key in map(str.encode, KEYS) else 0
        lane.insert(at, (p.key, p.value))
        before[(p.key, p.value)] = sum(1 for _, v in lane[:at] if (p.key, v) not in before)
    records = _interleave(queue)
    data = tmp_path / "w"
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group}
    proc = start_worker(ORDER_APP, data, broker, env)
    try:
        asyncio.run(produce(broker, topic, records))
        drained = asyncio.run(wait_drained(broker, group, topic, timeout=90))
        alive = proc.poll() is None
        status = order_status(data)
    finally:
        code = stop_worker(proc)
    rows = applied_at(data / "applied.db")
    got = parked(data)
    seqs: dict[str, list[int]] = defaultdict(list)
    first_at: dict[tuple[str, int], float] = {}
    for k, n, at in rows:
        seqs[k].append(n)
        first_at.setdefault((k, n), at)
    lost = sum(len(set(range(PER_KEY)) - set(seqs[k])) for k in KEYS)
    figures = FaultFigures("poison", events=len(records), parked=len(got), poison=len(corpus), lost=lost,
                           divergent=sum(seqs[k] != list(range(PER_KEY)) for k in KEYS))  # fmt: skip
    figures.seconds = time.monotonic() - started
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, (data / "worker.log").read_text()[-3000:])
    counters = status.get("counters", {})
    assert counters.get("pauses") == 0 and not any(s.get("down") for s in status.get("sinks", {}).values())
    assert {k: seqs[k] for k in KEYS} == {k: list(range(PER_KEY)) for k in KEYS}  # once each, in order
    by_message = {(r.key, r.value): r for r in got}
    assert len(by_message) == len(got), "a poison message was parked twice"
    expected = {(p.key, p.value): (p.name, p.stage, p.error_class) for p in corpus}
    found = {m: (expected.get(m, ("unexpected",))[0], r.stage, r.error_class) for m, r in by_message.items()}
    assert found == expected
    for (key, value), n in before.items():
        if n < PER_KEY and key.decode("utf-8", "replace") in KEYS:
            # the poison held its key: the next valid event of the key was applied after it was parked
            assert by_message[(key, value)].parked_at <= first_at[(key.decode(), n)], expected[(key, value)]


def _interleave(queue: dict[bytes, list[tuple[bytes, bytes]]]) -> list[tuple[bytes, bytes]]:
    """Round robin over the keys' lanes: keys interleave, each key keeps its order."""
    lanes = [list(lane) for lane in queue.values()]
    out = []
    while any(lanes):
        for lane in lanes:
            if lane:
                out.append(lane.pop(0))
    return out
