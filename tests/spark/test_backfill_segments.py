"""A backfill task writes the notification entries of its partition in runs of ``notify_every``
events (each after its writes), so it holds one run's mutations, not its whole partition's: the
entries of all runs list exactly the rows the events write (a model: ``map_event`` of each event),
each run under a batch id of its own (``backfill:<run>:<partition>``, then ``.1``, ``.2``...).
The archive is Parquet, read through the JVM's repartition (``spark_batch.archive``)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from pyspark.sql import SparkSession

from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from framework.notifications.entries import changed_row, decode_keys, key_ident
from framework.notifications.schema import NOTIFICATION_TABLE
from framework.runtime.mapping import map_event
from spark_batch.archive import write_parquet
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.notifications.notified_desk import app as desk

APP = "tests.notifications.notified_desk:app"


async def _entries(url: str) -> list[tuple[str, str, list[str]]]:
    """Every notification entry: its batch id, table and listed keys (``key_ident`` texts)."""
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan(NOTIFICATION_TABLE.name)]
    finally:
        await store.close()
    return [
        (
            str(r.key["batch_id"]),
            str(r.key["table_name"]),
            [key_ident(k) for k in decode_keys(str(r.cells["keys"].value))],
        )
        for r in rows
    ]


def test_the_entries_of_every_run_list_exactly_the_rows_written(spark: SparkSession, tmp_path: Path) -> None:
    events = list(deliver(generate_history(5, 15).events, 5))  # scrambled, with duplicates
    write_parquet(events, tmp_path / "archive.parquet")
    store, every = f"sqlite:///{tmp_path / 'wide.db'}", 16
    report = backfill(spark, [str(tmp_path / "archive.parquet")], store, app=APP, partitions=2,
                      notify_every=every)  # fmt: skip
    assert report.events == len(events) and not report.rejected
    marks = {p.version_table.name for p in desk.views}
    expected: set[tuple[str, str]] = set()
    for e in events:
        agent = desk.route(e)
        written = map_event(agent, e, desk.views_of(agent))
        expected |= {(m.table, key_ident(changed_row(m)[0])) for m in written if m.table not in marks}
    entries = asyncio.run(_entries(store))
    assert {(table, k) for _, table, keys in entries for k in keys} == expected
    batches = {b for b, _, _ in entries}
    runs = {b.rsplit(":", 1)[0] for b in batches}
    assert len(runs) == 1 and all(b.startswith("backfill:") for b in batches)
    by_partition: dict[str, set[int]] = {}
    for b in batches:
        partition, _, n = b.rsplit(":", 1)[1].partition(".")
        by_partition.setdefault(partition, set()).add(int(n or 0))
    assert set(by_partition) == {"0", "1"}
    # each partition's runs are numbered from 0 without a gap; together at least events / every
    assert all(ns == set(range(len(ns))) for ns in by_partition.values())
    assert sum(map(len, by_partition.values())) >= math.ceil(len(events) / every) > 2
