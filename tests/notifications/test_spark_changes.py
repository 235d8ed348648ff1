"""The Spark side: the backfill writes notifications, and the incremental reader exports the
current rows of what changed since a checkpoint to Parquet (``local[2]``, SQLite files)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from framework.cli import main
from framework.core.events import Event
from framework.core.mutations import Delete, Upsert
from framework.core.schema import Column, TableSchema
from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
from framework.notifications import entries as notification_entries
from framework.notifications.entries import changed_row, default_tenant_of, key_ident
from framework.notifications.sink import NotificationSink
from framework.runtime.mapping import map_event
from spark_batch.backfill import backfill
from spark_batch.changes import collect_changes, export_changes
from stores.sqlite import SqliteStore
from tests.notifications.notified_desk import app as desk

pytestmark = pytest.mark.slow  # a JVM, as every Spark test

T = TableSchema(
    "t", partition_key=(Column("org_id", "text"), Column("id", "text")), columns=(Column("v", "bigint"),)
)


async def _write(path: Path, batches: list[list[Upsert | Delete]]) -> None:
    store = await SqliteStore.open(path)
    try:
        for schema in (T, *NOTIFICATION_TABLES):
            await store.ensure_table(schema)
        sink = NotificationSink(
            store, "app", NotificationConfig(max_keys=3), prefix="w", clock=lambda: time.time() - 60
        )
        for n, mutations in enumerate(batches):
            await sink.write_batch([(Event(f"e{n}", "k", 1, 1, "x", {}), mutations)])
    finally:
        await store.close()


def _rows(spark: SparkSession, out: Path, table: str) -> dict[tuple[str, str], tuple]:
    return {
        (r.org_id, r.id): (r.v, r._deleted, r._reread) for r in spark.read.parquet(str(out / table)).collect()
    }


def test_export_writes_the_current_changed_rows_then_commits(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notification_entries, "MAX_PARTS", 1)  # past max_keys: one entry, re-read
    db = tmp_path / "wide.db"
    up = lambda org, i, v: Upsert("t", {"org_id": org, "id": i}, {"v": v}, v)  # noqa: E731
    asyncio.run(_write(db, [
        [up("o1", "a", 1), up("o1", "b", 1), up("o1", "c", 1), up("o1", "quiet", 1)],  # > max_keys: re-read
        [up("o2", "a", 2), up("o2", "b", 2)],
        [up("o2", "a", 3), Delete("t", {"org_id": "o2", "id": "b"}, 3), up("o3", "x", 3)],
    ]))  # fmt: skip
    store, cps = f"sqlite:///{db}", f"sqlite:///{tmp_path / 'cp.db'}"
    out = tmp_path / "out"
    report = export_changes(spark, store, cps, "snap", out, {"t": T}, settle=0)
    assert report.entries == 4 and report.reread == {"t": ["o1"]} and report.rows == {"t": 7}
    assert _rows(spark, out, "t") == {
        ("o1", "a"): (1, False, True), ("o1", "b"): (1, False, True), ("o1", "c"): (1, False, True),
        ("o1", "quiet"): (1, False, True),  # the whole tenant, re-read
        ("o2", "a"): (3, False, False), ("o2", "b"): (None, True, False),  # current row; a deleted key
        ("o3", "x"): (3, False, False),
    }  # fmt: skip
    assert report.committed is not None
    asyncio.run(_write(db, [[up("o3", "y", 4)]]))
    again = export_changes(spark, store, cps, "snap", out, {"t": T}, settle=0)
    assert again.entries == 1 and _rows(spark, out, "t") == {("o3", "y"): (4, False, False)}
    nothing = export_changes(spark, store, cps, "snap", tmp_path / "none", {"t": T}, settle=0)
    assert (nothing.entries, nothing.rows, nothing.committed) == (0, {}, None)


def test_the_backfill_notifies_each_partition_of_exactly_the_rows_it_wrote(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = deliver(generate_history(5, 15).events, 5)
    archive = tmp_path / "archive.jsonl"
    archive.write_bytes(b"\n".join(e.to_json() for e in events) + b"\n")
    store = f"sqlite:///{tmp_path / 'wide.db'}"
    report = backfill(spark, [str(archive)], store, app="tests.notifications.notified_desk:app", partitions=2)
    assert report.events == len(events) and not report.rejected
    changes = collect_changes(store, f"sqlite:///{tmp_path / 'cp.db'}", "c", settle=0)
    marks = {p.version_table.name for p in desk.views}
    expected: dict[str, set[str]] = {}
    tenants: set[tuple[str | None, str]] = set()
    for e in events:
        agent = desk.route(e)
        for m in map_event(agent, e, desk.views_of(agent)):
            if m.table not in marks:
                expected.setdefault(m.table, set()).add(key_ident(changed_row(m)[0]))
                tenants.add((default_tenant_of(m.table, m.key), m.table))
    assert {t: {key_ident(k) for k in keys} for t, keys in changes.keys.items()} == expected
    # one entry per (tenant, bucket, table) per Spark partition; the history's ingestion is one bucket
    assert len(tenants) <= changes.entries <= 2 * len(tenants)
    assert changes.last is not None and changes.last[3].startswith("backfill:")
    # the same changes through the CLI, for a consumer of its own
    out, cli = tmp_path / "out", ["spark", "changes", "--app", "tests.notifications.notified_desk:app"]
    cli += ["--wide-store", store, "--consumer", "snapshots", "--out", str(out), "--settle", "0", "--quiet"]
    assert main(cli) == 0
    for table, keys in expected.items():
        rows = spark.read.parquet(str(out / table)).collect()
        assert len(rows) == len(keys) and not any(r._deleted or r._reread for r in rows)
    assert main(cli) == 0
    assert "nothing new" in capsys.readouterr().out.splitlines()[-1]
