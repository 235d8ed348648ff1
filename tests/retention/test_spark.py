"""``converge spark retention``: the store side on local Spark (two shards per table) ends in the
same store as the embedded job; the index holds a fresh projection of the store; a second round
at the same time deletes nothing more; a backfill of the archive again brings nothing back.

Real parts: local Spark, a SQLite store, noida-db's Elasticsearch endpoint (``stack``).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.local_stack import StackInfo
from framework.retention import run_retention
from framework.runtime.projector import read_documents
from framework.testing.index import MemoryIndex
from spark_batch.archive import write_jsonl
from spark_batch.io import open_index
from stores.open import sqlite_url
from stores.sqlite import SqliteStore
from tests.retention.support import coordination
from tests.retention.toy import NOW_US, app, item_event

pytestmark = pytest.mark.slow
SPEC = "tests.retention.toy:app"


def _history(n: int, seed: int = 3) -> list[Any]:
    rng = random.Random(seed)
    kinds, orgs = ["set", "set", "log", "delete"], ["o1", "o2", "o3"]
    return [
        item_event(
            rng.choice(kinds),
            rng.choice(orgs),
            f"i{rng.randrange(60)}",
            rng.randrange(1, 40),
            rng.choice("ab"),
            rng.choice([0, -1, 1]),
        )
        for _ in range(n)
    ]


async def _cells(path: Path) -> dict[str, Any]:
    store = await SqliteStore.open(path)
    try:
        return {
            t.name: {
                tuple(r.key.values()): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                async for r in store.scan(t.name)
            }
            for t in app.tables
        }
    finally:
        await store.close()


async def _embedded(path: Path, root: Path) -> None:
    store, index = await SqliteStore.open(path), MemoryIndex()
    try:
        await index.ensure_index(app.projections[0].alias)
        with coordination(root) as coord:
            await run_retention(
                app,
                store,
                checkpoints=coord.checkpoints,
                locks=coord.locks,
                index=index,
                clock=lambda: NOW_US / 1e6,
            )
    finally:
        await store.close()


async def _documents_match_store(path: Path, es_url: str) -> None:
    p = app.projections[0]
    store, index = await SqliteStore.open(path), open_index(es_url, "document")
    try:
        keys = {(r.key["org_id"], r.key["item_id"]) for t in p.tables async for r in _scan(store, t.name)}
        docs = await read_documents(store, p, [{"org_id": o, "item_id": i} for o, i in sorted(keys)])
        want = {d: (dict(doc), v) for d, doc, v in docs if doc is not None}
        await index.refresh(p.alias)
        got = {h.doc_id: (dict(h.source), h.version) async for h in index.scan(p.alias)}
        assert got == want
    finally:
        await index.close()
        await store.close()


async def _scan(store: SqliteStore, table: str) -> Any:
    async for r in store.scan(table):
        yield r


def test_spark_retention_equals_the_embedded_job(tmp_path: Path, stack: StackInfo) -> None:
    archive = tmp_path / "archive.jsonl"
    write_jsonl(_history(1500), archive)
    db = tmp_path / "wide.db"
    es = ["--es-url", stack.es_url, "--es-tombstones", "document"]
    backfill = [
        "spark",
        "backfill",
        str(archive),
        "--app",
        SPEC,
        "--wide-store",
        sqlite_url(db),
        "--dlq-root",
        str(tmp_path / "dlq"),
        "--project",
        "--quiet",
        *es,
    ]
    assert main(backfill) == 0
    embedded = tmp_path / "embedded"
    embedded.mkdir()
    for suffix in ("", "-wal"):  # the store's file and its write-ahead log, if any
        if Path(f"{db}{suffix}").exists():
            shutil.copy(f"{db}{suffix}", f"{embedded / 'wide.db'}{suffix}")
    asyncio.run(_embedded(embedded / "wide.db", embedded))

    report = tmp_path / "report.json"
    retention = [
        "spark",
        "retention",
        "--app",
        SPEC,
        "--wide-store",
        sqlite_url(db),
        "--shards",
        "2",
        "--checkpoints",
        sqlite_url(tmp_path / "cp.db"),
        "--locks",
        sqlite_url(tmp_path / "locks.db"),
        "--report",
        str(report),
        "--quiet",
        *es,
    ]
    assert main([*retention, "--now", str(NOW_US / 1e6)]) == 0
    first = json.loads(report.read_text())
    assert main([*retention, "--now", str(NOW_US / 1e6)]) == 0
    second = json.loads(report.read_text())
    assert first["tables"]["item"]["rows_deleted"] + first["tables"]["item"]["rows_trimmed"] > 0
    assert first["tables"]["item_log"]["rows_deleted"] > 0
    assert all(t["cells_deleted"] == 0 for t in second["tables"].values())
    after = asyncio.run(_cells(db))
    assert after == asyncio.run(_cells(embedded / "wide.db"))
    asyncio.run(_documents_match_store(db, stack.es_url))
    assert main(backfill) == 0  # the whole archive again
    assert asyncio.run(_cells(db)) == after
    asyncio.run(_documents_match_store(db, stack.es_url))
