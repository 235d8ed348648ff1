"""``converge spark backfill --project`` writes the aggregates as it projects documents (issue 42,
item 7), on both example apps: after one backfill of an archive in arrival order (duplicates,
replays, reordering), every aggregate's stored totals are the app oracle's (``expected_totals``,
plain loops over the history's ground truth: the in-order model), with no ``spark aggregate
--write`` run; the broker's group topics version the totals (the CLI passes ``--broker``, or
``CONVERGE_BROKER``: tests/spark/test_support_desk.py runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from framework.aggregates.tables import decode_measures, tables_of
from framework.core.aggregate import group_id, parse_series
from framework.local_stack import StackInfo
from spark_batch.apps import load_app
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.spark.support import TOMBSTONES, run, sqlite_url


async def _stored_totals(url: str, spec: str) -> dict[str, dict[str, dict[str, float]]]:
    """``{aggregate: {group id: measures}}`` of every ``_totals`` row holding totals."""
    store = await open_wide_store(url)
    try:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for a in load_app(spec).aggregates:
            rows = [r async for r in store.scan(tables_of(a).totals.name)]
            out[a.name] = {
                group_id(parse_series(str(r.key["series"])), int(str(r.key["window"]))): decode_measures(
                    r.cells["measures"].value
                )
                for r in rows
                if "measures" in r.cells
            }
        return out
    finally:
        await store.close()


def _close(found: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Equal groups and measures (sums added in another order may round apart by 1e-9)."""
    if found.keys() != expected.keys():
        return False
    for g, measures in expected.items():
        if found[g].keys() != measures.keys():
            return False
        for k, v in measures.items():
            if abs(found[g][k] - v) > 1e-9 * max(1.0, abs(v)):
                return False
    return True


def test_support_desk_backfill_project_writes_the_oracles_totals(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    from examples.support_desk.generator import generate_history
    from examples.support_desk.history import deliver
    from examples.support_desk.oracle import expected_totals

    spec = "examples.support_desk.app:app"
    history = generate_history(6, 40)
    write_jsonl(deliver(history.events, 6), tmp_path / "archive.jsonl")
    url = sqlite_url(tmp_path / "wide.db")
    report = backfill(
        spark, [str(tmp_path / "archive.jsonl")], url, app=spec, es_url=stack.es_url, tombstones=TOMBSTONES,
        partitions=2, broker=f"kafka://{stack.kafka_bootstrap}", dlq_root=str(tmp_path / "dlq"),
        denylist_store=url,
    )  # fmt: skip
    written = report.aggregated or {}
    expected = expected_totals(history.truth)
    assert set(written) == set(expected) and all(w["totals"] > 0 for w in written.values()), written
    stored = run(_stored_totals(url, spec))
    assert all(expected.values())
    for name in expected:
        assert _close(stored[name], expected[name]), name


def test_activity_platform_backfill_project_writes_the_oracles_totals(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    from examples.activity_platform.generator import generate_history
    from examples.activity_platform.oracle import expected_totals

    spec = "examples.activity_platform.app:app"
    history = generate_history(2024, 300, n_orgs=2)
    write_jsonl(list(history.events), tmp_path / "archive.jsonl")  # the generator's arrival order
    url = sqlite_url(tmp_path / "wide.db")
    report = backfill(
        spark, [str(tmp_path / "archive.jsonl")], url, app=spec, es_url=stack.es_url, tombstones=TOMBSTONES,
        partitions=2, broker=f"kafka://{stack.kafka_bootstrap}",
    )  # fmt: skip
    expected = expected_totals(history.truth, history.distinct())
    assert report.aggregated is not None and set(report.aggregated) == set(expected)
    stored = run(_stored_totals(url, spec))
    assert all(expected.values())
    for name in expected:
        assert _close(stored[name], expected[name]), name
    # without a broker nothing says where the stream's totals stand: no aggregates are written
    again = backfill(spark, [str(tmp_path / "archive.jsonl")], url, app=spec, partitions=2)
    assert again.aggregated is None


def test_cli_backfill_project_stops_before_any_write_when_the_broker_cannot_be_read(
    spark: SparkSession, stack: StackInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The totals' versions need the group topics' ends: an unreachable ``--broker`` is exit 2
    before the backfill writes a row."""
    from examples.support_desk.generator import generate_history
    from framework.cli import main

    spec = "examples.support_desk.app:app"
    write_jsonl(list(generate_history(6, 5).events), tmp_path / "archive.jsonl")
    url = sqlite_url(tmp_path / "wide.db")
    archive = str(tmp_path / "archive.jsonl")
    args = ["spark", "backfill", archive, "--project", "--app", spec, "--wide-store", url,
            "--es-url", stack.es_url, "--es-tombstones", TOMBSTONES, "--broker", "kafka://127.0.0.1:1",
            "--dlq-root", str(tmp_path / "dlq"), "--denylist-store", url, "--quiet"]  # fmt: skip
    assert main(args) == 2
    assert "kafka://127.0.0.1:1" in capsys.readouterr().err
    assert run(_stored_rows(url, "ticket")) == 0


async def _stored_rows(url: str, table: str) -> int:
    store = await open_wide_store(url)
    try:
        return len([r async for r in store.scan(table)])
    finally:
        await store.close()
