"""The convergence check finds exactly what was corrupted, and its repair makes the next check clean."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected, compare_documents
from framework.cli import main
from framework.local_stack import StackInfo
from spark_batch.apps import tables_of
from spark_batch.convergence import CATEGORIES, check, repair
from spark_batch.io import open_index, read_index, read_store_rows
from tests.spark.support import (
    APP,
    PROJECTION,
    TOMBSTONES,
    check_reference,
    documents,
    populate,
    project_all,
    run,
    sqlite_url,
    unique_alias,
)


@pytest.fixture(scope="module")
def store(history: History, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The history applied to a SQLite store (read-only for these tests)."""
    url = sqlite_url(tmp_path_factory.mktemp("check") / "wide.db")
    run(populate(url, history.events))
    return url


@pytest.fixture()
def alias(store: str, expected: Expected, stack: StackInfo) -> str:
    """A fresh alias holding the projection of every hub row."""
    name = unique_alias("check")
    run(project_all(store, stack.es_url, name, expected.documents))
    return name


async def _corrupt(es_url: str, alias: str, expected: Expected) -> dict[str, list[str]]:
    """Damage the index behind the pipeline's back; the keys per category."""
    ids = sorted(expected.documents)
    keys = {"missing": ids[0:3], "stale": ids[3:6], "content": ids[6:9]}
    dead = sorted(set(expected.engagement) - set(expected.documents))[:1]  # a log but no live hub row
    keys["orphaned"] = sorted([f"orphan-{uuid.uuid4().hex[:6]}" for _ in range(2)] + dead)
    index = open_index(es_url, TOMBSTONES)
    concrete = f"{alias}-v1"
    try:
        for doc_id in keys["missing"] + keys["stale"]:
            await index.client.delete(index=concrete, id=doc_id)  # lost writes (noida keeps no tombstone)
        for doc_id in keys["stale"]:
            doc, version = expected.documents[doc_id]
            assert await index.index(alias, doc_id, doc, version - 1)
        for doc_id in keys["content"]:
            doc, version = expected.documents[doc_id]
            assert await index.index(alias, doc_id, {**doc, "subject": "tampered"}, version)
        for doc_id in keys["orphaned"]:
            assert await index.index(alias, doc_id, {"hub_id": doc_id, "has_record": False}, 1_000)
    finally:
        await index.close()
    return keys


def test_a_converged_index_checks_clean(
    spark: SparkSession, store: str, alias: str, expected: Expected, stack: StackInfo
) -> None:
    run_ = check_reference(spark, store, stack.es_url, alias)
    run_.release()
    assert run_.report.clean, run_.report.to_dict()
    assert run_.report.expected_docs == run_.report.index_docs == len(expected.documents)


def test_corruption_is_reported_exactly_and_repair_makes_the_next_check_clean(
    spark: SparkSession, store: str, alias: str, expected: Expected, stack: StackInfo
) -> None:
    keys = run(_corrupt(stack.es_url, alias, expected))
    found = check_reference(spark, store, stack.es_url, alias, sample=100)
    try:
        report = found.report
        assert report.counts == {c: len(keys.get(c, [])) for c in CATEGORIES}
        assert {c: report.samples[c] for c in keys} == keys and report.samples["ahead"] == []
        actions = repair(
            spark, found, store_url=store, es_url=stack.es_url, tombstones=TOMBSTONES, partitions=2
        )
    finally:
        found.release()
    assert actions == {"index": 9, "delete": len(keys["orphaned"])}

    again = check_reference(spark, store, stack.es_url, alias)
    again.release()
    assert again.report.clean, again.report.to_dict()
    assert compare_documents(expected.documents, run(documents(stack.es_url, alias))) == []


def test_ahead_documents_are_reported_and_parquet_inputs_agree(
    spark: SparkSession, store: str, alias: str, expected: Expected, stack: StackInfo, tmp_path: Path
) -> None:
    """A document newer than its row is ``ahead``; exported Parquet inputs give the same report."""
    doc_id = sorted(expected.documents)[-1]
    doc, version = expected.documents[doc_id]

    async def write_ahead() -> None:
        index = open_index(stack.es_url, TOMBSTONES)
        try:
            await index.index(alias, doc_id, doc, version + 5)
            await index.refresh(alias)
        finally:
            await index.close()

    run(write_ahead())
    live = check_reference(spark, store, stack.es_url, alias)
    live.release()
    assert live.report.counts["ahead"] == 1 and live.report.samples["ahead"] == [doc_id]
    assert live.report.divergent == 1

    tables = [t.name for t in tables_of(PROJECTION)]  # the source tables and the version marks
    read_store_rows(spark, store, tables, 2).write.parquet(str(tmp_path / "rows"))
    read_index(spark, stack.es_url, alias, 2, tombstones=TOMBSTONES).write.parquet(str(tmp_path / "docs"))
    offline = check(
        spark,
        app=APP,
        alias=alias,
        store_parquet=str(tmp_path / "rows"),
        index_parquet=str(tmp_path / "docs"),
        shards=3,
    )
    offline.release()
    assert offline.report.counts == live.report.counts and offline.report.samples == live.report.samples
    assert offline.report.expected_docs == live.report.expected_docs


def test_cli_check_exits_1_on_divergence_and_0_after_repair(
    spark: SparkSession, store: str, alias: str, expected: Expected, stack: StackInfo, tmp_path: Path
) -> None:
    keys = run(_corrupt(stack.es_url, alias, expected))
    args = [
        "spark",
        "check",
        "--app",
        APP,
        "--store",
        store,
        "--es-url",
        stack.es_url,
        "--alias",
        alias,
        "--tombstones",
        TOMBSTONES,
        "--shards",
        "2",
        "--slices",
        "2",
        "--quiet",
    ]
    assert main([*args, "--report", str(tmp_path / "before.json")]) == 1
    before = json.loads((tmp_path / "before.json").read_text())["activities"]["check"]
    assert before["counts"]["missing"] == len(keys["missing"]) and not before["clean"]
    assert main([*args, "--repair", "--report", str(tmp_path / "repair.json")]) == 0
    after = json.loads((tmp_path / "repair.json").read_text())["activities"]
    assert after["check"]["repair"]["actions"]["index"] == 9 and after["after_repair"]["clean"]
