"""``converge spark idmap``: the collapse per tenant (``applyInPandas``) and the moves in Spark tasks
end in the same store as the embedded job; a second turn changes nothing.

Real parts: local Spark (``local[2]``), SQLite store files, noida-db's Kafka (``stack``).
"""

from __future__ import annotations

import asyncio
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
from framework.core.mutations import LogState, Upsert
from framework.idmutation import IdRequest, map_topic_of
from framework.idmutation.job import ensure_tables, run_id_mutation
from framework.idmutation.tables import MAP_TABLE
from framework.idmutation.topic import KafkaLog
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import StackInfo
from stores.open import sqlite_url
from stores.sqlite import SqliteStore
from tests.idmutation.job_app import REQUESTS_TOPIC, plain

pytestmark = pytest.mark.slow
SPEC = "tests.idmutation.job_app:plain"
NOW = 1_800_000_000.0


def requests(seed: int = 5) -> list[IdRequest]:
    """Chains, merges, deletes and re-used ids over a dozen owners of two tenants."""
    rng = random.Random(seed)
    out = []
    for n in range(30):
        old = f"o{rng.randrange(12)}"
        new = None if rng.random() < 0.15 else f"o{rng.randrange(12)}"
        if new == old:
            new = f"o{(int(old[1:]) + 1) % 12}"
        op = "delete" if new is None else "convert"
        tenant = rng.choice(["sa", "sb"])
        out.append(IdRequest(executed_at=rng.randrange(1, 100), request_id=f"s{n}", tenant=tenant, op=op,
                             old_id=old, new_id=new))  # fmt: skip
    return out


async def seed(db: Path) -> None:
    rng = random.Random(9)
    store = await SqliteStore.open(db)
    await ensure_tables(store, plain)
    writes: list[Any] = []
    for i in range(300):
        key = {"tenant": rng.choice(["sa", "sb"]), "owner": f"o{rng.randrange(12)}"}
        version = rng.randrange(1, 120)
        if i % 4:
            writes.append(Upsert("activity", {**key, "item": f"i{rng.randrange(5)}"},
                                 {rng.choice("ab"): f"v{i}"}, version))  # fmt: skip
        else:
            writes.append(LogState("activity_log", key, f"s{i}", version, f"e{i}", version))
    await store.apply(writes)
    await store.close()


async def dump(db: Path) -> dict[str, Any]:
    store = await SqliteStore.open(db)
    try:
        out = {}
        for table in ("activity", "activity_log", MAP_TABLE.name):
            rows = [r async for r in store.scan(table)]
            out[table] = sorted(
                (tuple(r.key.values()), tuple((c, x.value, x.writetime) for c, x in r.cells.items()))
                for r in rows
            )
        return out
    finally:
        await store.close()


def test_the_spark_job_ends_in_the_embedded_jobs_store(tmp_path: Path, stack: StackInfo, spark: Any) -> None:
    broker = stack.kafka_bootstrap
    embedded, on_spark = tmp_path / "embedded.db", tmp_path / "spark.db"

    async def prepare() -> None:
        await ensure_topics(broker, {REQUESTS_TOPIC: 1, map_topic_of(plain.name): 1})
        import json

        await produce(broker, REQUESTS_TOPIC, [(None, json.dumps(r.to_dict()).encode()) for r in requests()])
        await seed(embedded)

    asyncio.run(prepare())
    shutil.copy(embedded, on_spark)
    before = asyncio.run(dump(embedded))

    async def embedded_turn() -> Any:
        store = await SqliteStore.open(embedded)
        cps = SqliteCheckpointStore(tmp_path / "e-checkpoints.db")
        locks = SqliteDomainLocks(tmp_path / "e-jobs.db")
        try:
            return await run_id_mutation(plain, store, checkpoints=cps, locks=locks, log=KafkaLog(broker),
                                         until_idle=True, settle=0, clock=lambda: NOW)  # fmt: skip
        finally:
            await store.close()
            await cps.close()
            locks.close()

    asyncio.run(embedded_turn())
    common = ["spark", "idmap", "--app", SPEC, "--wide-store", sqlite_url(on_spark), "--broker", broker,
              "--checkpoints", sqlite_url(tmp_path / "s-checkpoints.db"),
              "--locks", sqlite_url(tmp_path / "s-jobs.db"), "--dlq-root", str(tmp_path / "dlq"),
              "--settle", "0", "--now", str(NOW), "--until-idle", "--quiet"]  # fmt: skip
    assert main(common) == 0
    after = asyncio.run(dump(on_spark))
    assert after == asyncio.run(dump(embedded))
    assert after["activity"] != before["activity"] and after[MAP_TABLE.name]
    assert main(common) == 0  # nothing new: the same store
    assert asyncio.run(dump(on_spark)) == after
