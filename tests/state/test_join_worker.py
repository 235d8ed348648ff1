"""Joins on the embedded stack: a worker killed with SIGKILL and replaced by one on a fresh data
dir restores its pending events from the changelog and converges; the entries come back from
the lookup topic itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, start_worker, stop_worker
from stores.open import open_wide_store
from tests.state.join_app import child, parent_set
from tests.state.join_model import At

pytestmark = pytest.mark.slow

APP = "tests.state.join_app:app"


async def _rows(url: str) -> dict[tuple[str, str], tuple[dict, int]]:
    store = await open_wide_store(url)
    try:
        return {(r.key["parent"], r.key["msg_id"]): (r.values(), r.version) async for r in store.scan("msg")}
    finally:
        await store.close()


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _send(broker: str, topic: str, events: list) -> None:
    asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events]))


def test_sigkill_then_fresh_data_dir_restores_pending_and_converges(
    fresh_stack: LocalStack, tmp_path: Path
) -> None:
    assert fresh_stack.info is not None
    broker = f"kafka://{fresh_stack.info.kafka_bootstrap}"
    store = f"sqlite:///{tmp_path / 'wide.db'}"
    env = {"CONVERGE_WIDE_STORE": store, "CONVERGE_APP_ID": "join-crash", "CONVERGE_PARTITIONS": "2"}
    asyncio.run(ensure_topics(broker, {"t.parents": 2, "t.children": 2}))
    convs = [f"c{i}" for i in range(8)]
    children = [child(f"m{i}", convs[i % 8], f"b{i}", 1000 + i) for i in range(40)]
    early = [parent_set(c, f"A{c}", "first", 500) for c in convs[:4]]  # half the entries
    _send(broker, "t.parents", early)
    _send(broker, "t.children", children)
    w1 = start_worker(APP, tmp_path / "w1", broker, env)
    try:
        assert asyncio.run(wait_drained(broker, "join-crash", "t.children", timeout=90))
        _wait(lambda: len(asyncio.run(_rows(store))) == 20, 30, "the children with entries")
    finally:
        kill_worker(w1)
    fresh_stack.restart()  # noida-db keeps a SIGKILLed member in its group: restart it gracefully
    late = [parent_set(c, f"A{c}", "first", 500) for c in convs[4:]]
    moved = [parent_set(c, f"B{c}", "second", 5000) for c in convs[:2]]
    w2 = start_worker(APP, tmp_path / "w2", broker, env)  # a fresh data dir
    try:
        _send(broker, "t.parents", late + moved)
        final = {c: (f"A{c}", "first", 500) for c in convs}
        final |= {c: (f"B{c}", "second", 5000) for c in convs[:2]}
        oracle = {}
        for c in children:
            parent, label, v = final[c.payload["conv"]]
            cells = {"body": c.payload["body"], "conv": c.payload["conv"], "label": label}
            oracle[(parent, c.payload["msg_id"])] = At(cells, c.version, 16)  # +1 per entry change
        _wait(lambda: asyncio.run(_rows(store)) == oracle, 90, "the oracle's rows")
    finally:
        assert stop_worker(w2) == 0
    log = (tmp_path / "w2" / "worker.log").read_text()
    assert "Traceback" not in log, log[-3000:]
