"""The ID mutation job screens its re-routing against the deny-list (``converge idmap run``'s
``run_id_mutation`` on the session's noida-db, SQLite coordination, the test driver's store):
records of an erased subject written after the erasure (a worker's stale screen) are not routed
back when a turn learns a merge of their id; they are deleted."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from framework import App
from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
from framework.dlq import DeadLetterWAL
from framework.erasure.run import erase
from framework.erasure.screen import screen_verdict
from framework.idmutation import IdMutation, IdRequest, map_topic_of
from framework.idmutation.job import run_id_mutation
from framework.idmutation.routes import ROUTES_TABLE
from framework.idmutation.topic import KafkaLog
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import StackInfo
from framework.testing import Driver
from tests.erasure.test_id_routes import DECLARATIONS, SUBJECT, stale_records
from tests.idmutation.stream_app import NoteAgent, OwnerAgent
from tests.idmutation.stream_app import app as stream_app


def test_a_job_turn_does_not_route_an_erased_subjects_records_back(
    tmp_path: Path, stack: StackInfo, erasure_key: bytes
) -> None:
    topic = f"idm-erasure-{uuid.uuid4().hex[:8]}"
    config = stream_app.id_mutation
    assert config is not None
    app = App(f"idm-erasure-{uuid.uuid4().hex[:6]}", agents=[OwnerAgent(), NoteAgent()],
              id_mutation=IdMutation(topic, columns=config.columns),
              personal_data=[DECLARATIONS["row"]])  # fmt: skip
    checkpoints = SqliteCheckpointStore(tmp_path / "checkpoints.db")
    locks = SqliteDomainLocks(tmp_path / "jobs.db")
    broker = stack.kafka_bootstrap
    with Driver(app) as d:
        d.run(ensure_topics(broker, {topic: 1, map_topic_of(app.name): 1}))

        def turn(*requests: IdRequest) -> None:
            values = [(None, json.dumps(r.to_dict()).encode()) for r in requests]
            d.run(produce(broker, topic, values))

            async def go() -> None:
                wal = await asyncio.to_thread(DeadLetterWAL, tmp_path / "dlq")
                try:
                    await run_id_mutation(app, d.store, checkpoints=checkpoints, locks=locks,
                                          log=KafkaLog(broker), dlq=wal, settle=0,
                                          clock=lambda: d.now + 5, screen=screen_verdict)  # fmt: skip
                finally:
                    wal.close()

            d.run(go())

        try:
            d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
            turn(IdRequest(26, "r1", "t1", "delete", "5", None))
            d.run(d.store.apply(stale_records("t1", "5", "x1", 67, body="ann@x.io", kind="call")))
            d.run(d.store.apply(stale_records("t1", "5", "x2", 68, body="kept", kind="mail")))
            assert len(d.rows(ROUTES_TABLE.name)) == 4  # a value record per cell
            turn(IdRequest(62, "r2", "t1", "merge", "5", "2"))
            owned = {(r.key["owner_id"], r.key["activity_id"]): r.values() for r in d.rows("owner_activity")}
            assert owned == {("2", "x2"): {"body": "kept", "kind": "mail"}}
            left = {r.key["row"] for r in d.rows(ROUTES_TABLE.name)}  # the subject's records deleted
            assert left == {'[["activity_id", "sx2"], ["tenant", "st1"]]'}
        finally:
            checkpoints.close_sync()
            locks.close()
