"""Zero-downtime reindex while a writer keeps updating rows through the alias."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected
from framework.cli import main
from framework.core.mutations import Upsert
from framework.local_stack import StackInfo
from framework.runtime.projector import project_partition
from spark_batch.io import open_index
from spark_batch.reindex import reindex
from stores.open import open_wide_store
from tests.spark.support import (
    APP,
    HUB,
    PROJECTION,
    TOMBSTONES,
    check_reference,
    populate,
    project_all,
    run,
    sqlite_url,
    unique_alias,
)


class Writer(threading.Thread):
    """The stream: updates hub rows (and their version marks) with ever newer versions, then projects
    them through the alias."""

    def __init__(self, url: str, es_url: str, alias: str, hubs: list[str], base: int) -> None:
        super().__init__(daemon=True)
        self.url, self.es_url, self.alias, self.hubs, self.base = url, es_url, alias, hubs, base
        self.stop = threading.Event()
        self.last: dict[str, str] = {}
        self.count = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    async def _run(self) -> None:
        store = await open_wide_store(self.url)
        index = open_index(self.es_url, TOMBSTONES)
        try:
            while not self.stop.is_set():
                hub = self.hubs[self.count % len(self.hubs)]
                subject = f"update {self.count}"
                version = self.base + self.count + 1
                upsert = Upsert(HUB, {"hub_id": hub}, {"subject": subject}, version)
                await store.apply([upsert, *PROJECTION.version_marks([upsert])])
                await project_partition(store, index, PROJECTION, {"hub_id": hub}, alias=self.alias)
                self.last[hub] = subject
                self.count += 1
                await asyncio.sleep(0.005)
        finally:
            await index.close()
            await store.close()


@pytest.fixture()
def platform(history: History, expected: Expected, stack: StackInfo, tmp_path: Path) -> tuple[str, str]:
    url = sqlite_url(tmp_path / "wide.db")
    run(populate(url, history.events))
    alias = unique_alias("reindex")
    run(project_all(url, stack.es_url, alias, expected.documents))
    return url, alias


async def _served(es_url: str, alias: str, hubs: list[str]) -> tuple[list[str], dict[str, str | None], bool]:
    index = open_index(es_url, TOMBSTONES)
    try:
        docs = {h: await index.get(alias, h) for h in hubs}
        old_exists = bool(await index.client.indices.exists(index=f"{alias}-v1"))
        subjects = {h: None if d is None else d.source.get("subject") for h, d in docs.items()}
        return await index.alias_indices(alias), subjects, old_exists
    finally:
        await index.close()


def test_reindex_under_writes_swaps_without_losing_an_update(
    spark: SparkSession, platform: tuple[str, str], expected: Expected, stack: StackInfo
) -> None:
    url, alias = platform
    live = sorted(h for h, (doc, _) in expected.documents.items() if doc["has_record"])[:40]
    base = max(v for _, v in expected.documents.values())
    writer = Writer(url, stack.es_url, alias, live, base)
    mappings = {
        "properties": {
            **PROJECTION.mappings["properties"],
            "subject": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        }
    }
    writer.start()
    try:
        while writer.count < 5 and writer.error is None:
            writer.stop.wait(0.05)
        before = writer.count
        report = reindex(
            spark,
            app=APP,
            store_url=url,
            es_url=stack.es_url,
            alias=alias,
            mappings=mappings,
            tombstones=TOMBSTONES,
            shards=2,
        )
        during = writer.count - before
        target = writer.count + 5
        while writer.count < target and writer.error is None:  # some writes land after the swap too
            writer.stop.wait(0.05)
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    assert writer.error is None
    assert during > 0, "the writer must keep writing while the reindex runs"
    assert report.new_index == f"{alias}-v2" and report.old_indices == [f"{alias}-v1"]
    assert report.built.get("ok", 0) >= len(expected.documents) - len(live)

    indices, subjects, old_exists = run(_served(stack.es_url, alias, sorted(writer.last)))
    assert indices == [f"{alias}-v2"] and old_exists
    assert subjects == writer.last  # every hub serves its last update: nothing lost
    final = check_reference(spark, url, stack.es_url, alias)
    final.release()
    assert final.report.clean, final.report.to_dict()
    assert final.report.expected_docs == len(expected.documents)

    async def mapping() -> dict:
        index = open_index(stack.es_url, TOMBSTONES)
        try:
            return (await index.client.indices.get_mapping(index=f"{alias}-v2")).body
        finally:
            await index.close()

    assert run(mapping())[f"{alias}-v2"]["mappings"]["properties"]["subject"]["fields"]["raw"]


def test_cli_reindex_can_drop_the_old_index(
    spark: SparkSession, platform: tuple[str, str], stack: StackInfo, tmp_path: Path
) -> None:
    url, alias = platform
    args = [
        "spark",
        "reindex",
        "--app",
        APP,
        "--store",
        url,
        "--es-url",
        stack.es_url,
        "--alias",
        alias,
        "--tombstones",
        TOMBSTONES,
        "--shards",
        "2",
        "--drop-old",
        "--quiet",
        "--report",
        str(tmp_path / "r.json"),
    ]
    assert main(args) == 0
    indices, _, old_exists = run(_served(stack.es_url, alias, []))
    assert indices == [f"{alias}-v2"] and not old_exists
