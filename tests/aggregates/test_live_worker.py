"""Aggregates in a live worker on the embedded stack: contributions through the change topics,
totals through the group topics, equal to the model of the final tasks for a delivery shuffled,
duplicated and replayed."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest

from framework.aggregates.contributions import NONE
from framework.aggregates.tables import decode_measures, tables_of
from framework.core.aggregate import group_id, parse_series
from framework.kafka_admin import ensure_topics, produce, wait_all_drained
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker
from stores.sqlite import SqliteStore
from tests.aggregates.tasks import task_app
from tests.aggregates.test_driver import STATUSES, TEAMS, _delete, _model, _set

APP = task_app()


async def _totals(path: Path, name: str) -> dict[str, dict[str, float]]:
    store = SqliteStore(str(path))
    try:
        agg = APP.aggregate(name)
        rows = [r async for r in store.scan(tables_of(agg).totals.name)]
        return {
            group_id(parse_series(str(r.key["series"])), int(str(r.key["window"]))): decode_measures(
                r.cells["measures"].value
            )
            for r in rows
            if r.cells["measures"].value != NONE
        }
    finally:
        await store.close()


@pytest.mark.slow
def test_a_worker_maintains_totals_equal_to_the_model(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """On a noida-db of its own: the toy app's topics are fixed names, which the Spark tests
    fill on the session's."""
    assert fresh_stack.info is not None
    stack = fresh_stack.info
    rng = random.Random(26)
    history = []
    for v in range(1, 301):
        task = f"t{rng.randrange(30)}"
        if rng.random() < 0.1:
            history.append((v, ("delete", task, {})))
        else:
            cells = {"team": rng.choice(TEAMS), "status": rng.choice(STATUSES),
                     "points": float(rng.randrange(9)), "due": rng.randrange(5) * 86_400 + 60}  # fmt: skip
            history.append((v, ("set", task, dict(rng.sample(sorted(cells.items()), k=rng.randint(1, 4))))))
    events = [_delete(t, v) if kind == "delete" else _set(t, v, **c) for v, (kind, t, c) in history]
    delivery = events + rng.sample(events, k=40)
    rng.shuffle(delivery)
    delivery += rng.sample(events, k=len(events))  # replayed
    broker = f"kafka://{stack.kafka_bootstrap}"
    app_id = f"tasks-{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(broker, {t: 4 for t in APP.topics()}))
    asyncio.run(produce(broker, "tasks-in", [(e.ordering_key.encode(), e.to_json()) for e in delivery]))
    db = tmp_path / "wide.db"
    env = {"CONVERGE_WIDE_STORE": f"sqlite:///{db}", "CONVERGE_APP_ID": app_id, "CONVERGE_PARTITIONS": "4"}
    worker = start_worker("tests.aggregates.tasks:task_app", tmp_path / "worker", broker, env)
    try:
        topics = list(APP.topics())  # the agent's, then the change topics, then the group topics
        drained = asyncio.run(wait_all_drained(broker, app_id, topics, 180))
        drained = drained and asyncio.run(
            wait_all_drained(broker, app_id, topics, 60)
        )  # groups after changes
    finally:
        code = stop_worker(worker)
    log = (tmp_path / "worker" / "worker.log").read_text()[-4000:]
    assert drained and code == 0, log
    status, due = _model(history)
    assert status and due
    assert asyncio.run(_totals(db, "by_team_status")) == status
    assert asyncio.run(_totals(db, "due_by_team")) == due
