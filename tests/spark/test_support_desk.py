"""The second example app through every batch job, by the CLI: backfill --project, check, repair, reindex.

The support desk (``examples/support_desk``) is written on the public API
only; the jobs load it by ``--app`` like any app. Its independent oracle says
what the store and the index must hold. Real parts: local Spark, a SQLite
store, noida-db's Elasticsearch endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from examples.support_desk.oracle import expected_state
from framework.cli import main
from framework.local_stack import StackInfo
from spark_batch.archive import write_jsonl
from spark_batch.convergence import CATEGORIES
from spark_batch.io import open_index
from stores.open import open_wide_store
from tests.examples.support_desk.compare import divergences
from tests.spark.support import TOMBSTONES, documents, run, sqlite_url, unique_alias

SPEC = "examples.support_desk.app:app"


async def _rows(url: str) -> list[list[Any]]:
    store = await open_wide_store(url)
    try:
        return [[r async for r in store.scan(t)] for t in ("ticket", "ticket_status_log", "ticket_comment")]
    finally:
        await store.close()


Docs = dict[str, tuple[dict[str, Any], int]]


async def _corrupt(es_url: str, alias: str, expected: Docs) -> dict[str, list[str]]:
    ids = sorted(expected)
    keys = {"missing": ids[0:2], "stale": ids[2:3], "content": ids[3:5], "orphaned": ["no-such-ticket"]}
    index = open_index(es_url, TOMBSTONES)
    try:
        concrete = (await index.alias_indices(alias))[0]
        for doc_id in keys["missing"] + keys["stale"]:
            await index.client.delete(index=concrete, id=doc_id)
        for doc_id in keys["stale"]:
            doc, version = expected[doc_id]
            assert await index.index(alias, doc_id, doc, version - 1)
        for doc_id in keys["content"]:
            doc, version = expected[doc_id]
            assert await index.index(alias, doc_id, {**doc, "subject": "tampered"}, version)
        assert await index.index(alias, "no-such-ticket", {"subject": "ghost"}, 10)
    finally:
        await index.close()
    return keys


def test_support_desk_backfill_check_repair_reindex(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(5, 60)
    write_jsonl(deliver(history.events, 5), tmp_path / "archive.jsonl")  # scrambled, with duplicates
    expected = dict(expected_state(history.truth).documents)
    url, alias = sqlite_url(tmp_path / "wide.db"), unique_alias("tickets")
    common = ["--app", SPEC, "--wide-store", url, "--es-url", stack.es_url, "--es-tombstones", TOMBSTONES,
              "--alias", alias, "--quiet"]  # fmt: skip
    report = tmp_path / "report.json"

    archive, dlq = str(tmp_path / "archive.jsonl"), str(tmp_path / "dlq")
    backfill = ["spark", "backfill", archive, "--project", "--dlq-root", dlq]
    assert main([*backfill, *common, "--report", str(report)]) == 0
    filled = json.loads(report.read_text())
    assert filled["parked"] == 0 and filled["events"] > len(history.events)
    tickets, status_log, comments = run(_rows(url))
    docs = run(documents(stack.es_url, alias))
    assert not divergences(history, tickets, status_log, comments, docs)
    assert docs == expected

    checking = ["spark", "check", *common, "--shards", "2", "--slices", "2", "--sample", "20"]
    assert main([*checking, "--report", str(report)]) == 0
    assert json.loads(report.read_text())["tickets"]["check"]["expected_docs"] == len(expected)

    keys = run(_corrupt(stack.es_url, alias, expected))
    assert main([*checking, "--report", str(report)]) == 1
    found = json.loads(report.read_text())["tickets"]["check"]
    assert found["counts"] == {c: len(keys.get(c, [])) for c in CATEGORIES}
    assert main([*checking, "--repair", "--report", str(report)]) == 0
    assert json.loads(report.read_text())["tickets"]["after_repair"]["clean"]
    assert run(documents(stack.es_url, alias)) == expected

    assert main(["spark", "reindex", *common, "--shards", "2", "--report", str(report)]) == 0
    assert json.loads(report.read_text())["new_index"] == f"{alias}-v2"
    assert run(documents(stack.es_url, alias)) == expected
    assert main([*checking, "--report", str(report)]) == 0
