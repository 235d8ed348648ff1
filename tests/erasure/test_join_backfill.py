"""The join histories of ``test_join_property`` through ``converge spark backfill`` (local Spark,
SQLite): 300 histories with disjoint keys, ids and addresses, their subjects erased in the target
store first (its deny-list is the one of record), their events archived shuffled with duplicates,
then one backfill. Each history's rows equal the same model the stream's property checks (each
message of a body not erased under its conversation's final parent), so stream and backfill
agree; nothing is rejected, and ``verify`` finds no residue of a sample of the subjects.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.erasure import Subject, erase, verify
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.erasure.histories import delivery
from tests.erasure.test_join_property import app, history, model

pytestmark = pytest.mark.slow
SPEC = "tests.erasure.test_join_property:app"
HISTORIES = 300


async def _erase_all(url: str, subjects: list[str], key: bytes) -> None:
    store = await open_wide_store(url)
    try:
        for schema in app.tables:
            await store.ensure_table(schema)
        for value in subjects:
            await erase(app, Subject("email", value), key=key, store=store)
    finally:
        await store.close()


async def _read(url: str, subjects: list[str], key: bytes) -> tuple[list, list]:
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan("msg")]
        residue = [
            r for v in subjects for r in await verify(app, Subject("email", v.upper()), key=key, store=store)
        ]
        return rows, residue
    finally:
        await store.close()


def test_backfilled_join_histories_equal_the_model(
    spark: SparkSession, tmp_path: Path, erasure_key: bytes
) -> None:
    rng = random.Random(22)
    histories = [(f"h{h}-", *history(random.Random(h), f"h{h}-")) for h in range(HISTORIES)]
    archived = [e for _, events, _ in histories for e in delivery(rng, events)]
    rng.shuffle(archived)
    write_jsonl(archived, tmp_path / "archive.jsonl")
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    subjects = [v for _, _, erased in histories for v in erased]
    asyncio.run(_erase_all(url, subjects, erasure_key))

    report = backfill(spark, [str(tmp_path / "archive.jsonl")], url, app=SPEC)
    assert report.events == len(archived) and not report.rejected

    rows, residue = asyncio.run(_read(url, subjects[::15], erasure_key))
    stored: dict[str, dict] = {}
    for r in rows:
        prefix = str(r.key["msg_id"]).split("-")[0] + "-"
        stored.setdefault(prefix, {})[(str(r.key["parent"]), str(r.key["msg_id"]))] = r.values()
    for prefix, events, erased in histories:
        assert stored.get(prefix, {}) == model(events, erased), prefix
    assert sum(map(len, stored.values())) >= HISTORIES  # every history has a plain message
    assert residue == []
