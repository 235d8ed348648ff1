"""Requests learnt late, through ``converge spark backfill`` and the Spark ID-mutation moves: 300
random histories (``tests.idmutation.late_histories``) with disjoint tenants, so one run carries
them all. The map of the requests delivered in the first half of each history's arrival is in
``converge_id_map`` when the backfill stores every event delivered (duplicates included: the
backfill resolves and drops through that map, recording each cell it moves or drops); then the
Spark applier (``spark_batch.id_mutation.spark_applier``, the job's moves in Spark tasks) applies
the map of all requests; then the full map is stored and a second backfill writes the held-back
events and replays. Each history's rows equal the model's (written in the test), and equal the
rows the test driver stores for the same histories on the same schedule (stream and backfill
agree). Real parts: local Spark, a SQLite store file."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.idmutation import IdRequest, collapse
from framework.idmutation.apply import apply_id_map
from framework.idmutation.job import ensure_tables
from framework.idmutation.tables import MAP_TABLE, map_row
from framework.jobs.batches import Batch, BatchInput
from framework.testing import Driver
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from spark_batch.id_mutation import spark_applier
from stores.open import open_wide_store
from tests.idmutation.late_histories import History, make_history, model_rows, stored
from tests.idmutation.stream_app import app
from tests.spark.support import sqlite_url

pytestmark = pytest.mark.slow

APP = "tests.idmutation.stream_app:app"
N = 300
ACT_KEY = ("tenant", "owner_id", "activity_id")
LOG_KEY = ("tenant", "owner_id", "at", "event_id")


def schedule(history: History) -> tuple[list[IdRequest], list, list]:
    """The requests delivered in the first half of the arrival, the events delivered (with
    duplicates) and the tail (held back and replayed)."""
    half = history.arrival[: len(history.arrival) // 2]
    early = [history.requests[item[1]] for item in half if item[0] == "request"]
    sent = [history.events[item[1]] for item in history.arrival if item[0] == "event"]
    return list(dict.fromkeys(early)), sent, [history.events[i] for i in history.tail]


async def _prepare(url: str, early: list[IdRequest]) -> None:
    store = await open_wide_store(url)
    try:
        await ensure_tables(store, app)
        await store.apply([map_row(t, i, iv, 1, 1) for (t, i), iv in collapse(early).items()])
    finally:
        await store.close()


async def _store_map(url: str, requests: list[IdRequest]) -> None:
    store = await open_wide_store(url)
    try:
        await store.ensure_table(MAP_TABLE)
        await store.apply([map_row(t, i, iv, 2, 2) for (t, i), iv in collapse(requests).items()])
    finally:
        await store.close()


async def _rows(url: str, table: str) -> list:
    store = await open_wide_store(url)
    try:
        return [r async for r in store.scan(table)]
    finally:
        await store.close()


def by_tenant(rows: dict[tuple, dict]) -> dict[str, dict[tuple, dict]]:
    out: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for key, cells in rows.items():
        out[str(key[0]).split("-")[0]][key] = cells
    return out


def test_backfill_and_the_spark_moves_reroute_late_requests_like_the_model(
    spark: SparkSession, tmp_path: Path
) -> None:
    histories = [make_history(random.Random(n), tenants=(f"h{n}-a", f"h{n}-b")) for n in range(N)]
    early: list[IdRequest] = []
    sent: list = []
    tail: list = []
    for h in histories:
        e, s, t = schedule(h)
        early += e
        sent += s
        tail += t
    everything = [r for h in histories for r in h.requests]
    url = sqlite_url(tmp_path / "wide.db")
    asyncio.run(_prepare(url, early))
    first, second = tmp_path / "sent.jsonl", tmp_path / "tail.jsonl"
    write_jsonl(sent, first)
    write_jsonl(tail, second)

    report = backfill(spark, [str(first)], url, app=APP, partitions=3)
    assert report.rejected == {} and report.applied >= len(sent)
    batch = Batch(1, BatchInput(files=("late",)), int(time.time() * 1_000_000))
    applier = spark_applier(spark, url, APP, shards=3)
    moved = asyncio.run(applier("id_mutation.owner-stream", batch, collapse(everything)))
    assert moved.rerouted > 100 and moved.unconverged == 0, moved.to_dict()
    asyncio.run(_store_map(url, everything))
    assert backfill(spark, [str(second)], url, app=APP, partitions=3).rejected == {}

    acts = by_tenant(stored(asyncio.run(_rows(url, "owner_activity")), ACT_KEY))
    logs = by_tenant(stored(asyncio.run(_rows(url, "owner_log")), LOG_KEY))
    compared = 0
    for n, h in enumerate(histories):
        want_acts, want_logs = model_rows(h)
        assert acts.get(f"h{n}", {}) == want_acts, n
        assert logs.get(f"h{n}", {}) == want_logs, n
        compared += len(want_acts) + len(want_logs)
    assert compared > 2000

    # the stream on the same schedule: the early map published, the events sent, the whole map
    # applied and published, the tail sent
    with Driver(app) as d:
        d.id_job(early, apply=False, publish=True)
        assert d.send(sent) == []
        assert d.run(apply_id_map(d.store, app.id_mutation, collapse(everything))).unconverged == 0  # type: ignore[arg-type]
        d.id_job(everything, apply=False, publish=True)
        assert d.send(tail) == []
        assert by_tenant(stored(d.rows("owner_activity"), ACT_KEY)) == acts
        assert by_tenant(stored(d.rows("owner_log"), LOG_KEY)) == logs
