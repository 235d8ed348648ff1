"""Replay through the embedded broker (noida-db): write order, keys, bytes, windows, marking."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.replay import ORIGIN_HEADER, replay
from framework.kafka_admin import end_offsets
from framework.local_stack import StackInfo, free_port
from tests.dlq.damage_support import damaged_wal
from tests.dlq.kafka_support import new_topic, read_topic
from tests.dlq.support import FakeClock, rec
from tests.dlq.test_crash import REPO


async def test_replay_keeps_write_order_keys_and_bytes(stack: StackInfo, tmp_path: Path) -> None:
    boot = stack.kafka_bootstrap
    source = await new_topic(boot, "dlq-src")
    rnd = random.Random(6)
    clock = FakeClock()
    parked = []
    with DeadLetterWAL(tmp_path, max_segment_bytes=2000, clock=clock) as wal:
        for i in range(150):
            clock.tick(0.5)
            key = None if i % 11 == 0 else rnd.choice([b"user-1", b"user-2", b"\x00\xffbin"])
            r = rec(i, topic=source, key=key, value=rnd.randbytes(rnd.randrange(0, 300)),
                    event_type=rnd.choice(["signup", "purchase", "../evil"]))  # fmt: skip
            wal.park_sync(r)
            parked.append(r)
        wal.park_sync(rec(999, pipeline="other", topic=source))  # not selected
    store = DeadLetterStore(tmp_path, clock=clock)
    assert len(store.segments(SegmentFilter(pipeline="orders"))) > 3

    rep = await replay(
        store, SegmentFilter(pipeline="orders"), broker=f"kafka://{boot}", batch_size=64, progress=True
    )
    assert (rep.records, rep.topics, rep.skipped_open) == (150, {source: 150}, 0)
    got = await read_topic(boot, source)
    assert [(m.key, m.value) for m in got] == [(r.key, r.value) for r in parked]
    origins = [dict(m.headers)[ORIGIN_HEADER] for m in got[:2]]
    assert origins == [f"{source}:0:0".encode(), f"{source}:0:1".encode()]
    assert {s.status for s in store.segments(SegmentFilter(pipeline="orders"))} == {Status.REPLAYED}
    assert rep.segments == len(store.segments(SegmentFilter(pipeline="orders")))
    assert [e.record.offset for e in store.records()] == [999]

    again = await replay(store, SegmentFilter(pipeline="orders"), broker=f"kafka://{boot}")
    assert again.records == 0
    assert await end_offsets(f"kafka://{boot}", source) == {0: 150}


async def test_window_replay_to_a_named_topic_then_the_rest(stack: StackInfo, tmp_path: Path) -> None:
    """A window replays only its records; the others stay parked and replay later, each key in order."""
    boot = stack.kafka_bootstrap
    source = await new_topic(boot, "dlq-src", partitions=3)
    fixed = await new_topic(boot, "dlq-fixed", partitions=3)
    clock = FakeClock(0.0)
    parked = []
    with DeadLetterWAL(tmp_path, clock=clock) as wal:
        for i in range(90):
            clock.tick(1)  # parked_at = i + 1
            r = rec(i, topic=source, key=b"k%d" % (i % 7), error_class="Bad" if i % 3 else "Worse")
            wal.park_sync(r)
            parked.append(r)
    store = DeadLetterStore(tmp_path, clock=clock)
    window = SegmentFilter(error_class="Bad", since=21.0, until=61.0)  # offsets 20..59 not divisible by 3
    rep = await replay(store, window, broker=f"kafka://{boot}", topic=fixed)
    in_window = [r for r in parked if r.error_class == "Bad" and 20 <= r.offset < 60]
    assert rep.records == len(in_window) and rep.topics == {fixed: len(in_window)}
    assert _per_key(await read_topic(boot, fixed)) == _per_key_records(in_window)
    remaining = [e.record.offset for e in store.records(SegmentFilter(error_class="Bad"))]
    assert remaining == [r.offset for r in parked if r.error_class == "Bad" and r not in in_window]

    rest = await replay(store, SegmentFilter(), broker=f"kafka://{boot}")
    assert rest.records == 90 - len(in_window)
    others = [r for r in parked if r not in in_window]
    assert _per_key(await read_topic(boot, source)) == _per_key_records(others)
    assert list(store.records()) == []


def _per_key(msgs: list) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = defaultdict(list)
    for m in msgs:
        out[m.key].append(m.value)
    return dict(out)


def _per_key_records(recs: list) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = defaultdict(list)
    for r in recs:
        out[r.key].append(r.value)
    return dict(out)


async def test_an_unreachable_broker_marks_nothing(tmp_path: Path) -> None:
    with DeadLetterWAL(tmp_path) as wal:
        wal.park_sync(rec(0))
    store = DeadLetterStore(tmp_path)
    with pytest.raises(KafkaConnectionError):
        await replay(store, SegmentFilter(), broker=f"127.0.0.1:{free_port()}")
    assert [s.status for s in store.segments()] == [Status.SEALED]


async def test_replay_leaves_damaged_segments_sealed_and_exits_1(stack: StackInfo, tmp_path: Path) -> None:
    """A bit flip in a 28-record segment and a cut 2-record one: none of their records is sent."""
    boot = stack.kafka_bootstrap
    source = await new_topic(boot, "dlq-damaged")
    w = damaged_wal(tmp_path / "wal", topic=source)
    argv = [sys.executable, "-m", "framework.cli", "dlq", "replay", "--root", str(w.root), "--broker", boot]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert f"replayed 9 records ({source}: 9); 1 segments marked replayed" in done.stdout
    flipped, cut = w.segments["Bitflip"].path, w.segments["Cut"].path
    assert (
        f"not replayed (damaged): {flipped} (segment 1, sealed): 1 unreadable record at byte {w.flip_at}"
        in (done.stderr)
    )
    assert f"not replayed (damaged): {cut} (segment 2, sealed): 1 unreadable record at byte {w.torn_at}" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    store = w.store()
    assert [s.status for s in store.segments()] == [Status.SEALED, Status.SEALED, Status.REPLAYED]
    assert [m.value for m in await read_topic(boot, source)] == [b"v%d" % i for i in range(30, 39)]

    from framework.dlq.lifecycle import cleanup, salvage  # here, so the checks above run on any version

    assert cleanup(store, grace_s=0).segments == 1  # the replayed intact one; the damaged stay
    assert w.path("Bitflip").exists() and w.path("Cut").exists()
    salvage(store, SegmentFilter())
    rep = await replay(store, SegmentFilter(), broker=f"kafka://{boot}")
    assert (rep.records, rep.segments, rep.damaged) == (28, 2, ())
    values = [m.value for m in await read_topic(boot, source)]
    assert values[9:] == [b"v%d" % i for i in range(30) if i not in (10, 29)]


async def test_an_empty_sealed_segment_is_marked_replayed(stack: StackInfo, tmp_path: Path) -> None:
    """A writer killed between opening a segment and its first record leaves an empty one, which
    is sealed later: replaying everything marks it replayed too (it holds nothing left to send)."""
    boot = stack.kafka_bootstrap
    target = await new_topic(boot, "dlq-empty")
    with DeadLetterWAL(tmp_path) as wal:
        for i in range(3):
            wal.park_sync(rec(i))
        wal.rotate_sync(force=True)
        (part,) = {s.partition for s in wal.segments()}
        wal._start(part, wal.clock())  # opened, then the writer dies before its first record
        wal.rotate_sync(force=True)
    store = DeadLetterStore(tmp_path)
    assert sorted(s.count for s in store.segments()) == [0, 3]
    rep = await replay(store, SegmentFilter(), broker=f"kafka://{boot}", topic=target)
    assert (rep.records, rep.segments) == (3, 2)
    assert {s.status for s in store.segments()} == {Status.REPLAYED}
