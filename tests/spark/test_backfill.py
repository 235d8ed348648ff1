"""Backfill of the reference app: archived events through its agents into the store, on local Spark."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from examples.activity_platform.app import app as reference_app
from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected, compare_documents, compare_rows
from framework.cli import main
from framework.dlq import DeadLetterStore
from framework.local_stack import StackInfo
from spark_batch.archive import write_jsonl, write_parquet
from spark_batch.backfill import backfill
from tests.spark.support import (
    APP,
    HUB,
    LOG,
    TOMBSTONES,
    documents,
    mutations,
    populate,
    read_state,
    run,
    sqlite_url,
    unique_alias,
)


def _assert_store_is_oracle(url: str, expected: Expected) -> None:
    hubs, logs = run(read_state(url))
    assert compare_rows(HUB, expected.hub_rows, hubs) == []
    assert compare_rows(LOG, expected.engagement_logs, logs) == []


def _expected_counts(history: History) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {}
    for e in history.events:
        agent = reference_app.route(e).name
        counts.setdefault(agent, Counter()).update(type(m).__name__ for m in mutations(e))
    return {a: dict(c) for a, c in counts.items()}


def test_backfill_equals_the_oracle_and_a_rerun_changes_nothing(
    spark: SparkSession, history: History, expected: Expected, stack: StackInfo, tmp_path: Path
) -> None:
    events = history.events
    half = len(events) // 2
    write_jsonl(events[:half], tmp_path / "part-1.jsonl")
    write_jsonl(events[half:], tmp_path / "part-2.jsonl.gz")
    bad = {"event_id": "x1", "ordering_key": "k", "version": 1, "occurred_at": 1, "type": "no.such"}
    missing = json.loads(events[0].to_json())
    missing["payload"].pop("org_id")
    missing["event_id"] = "x2"
    (tmp_path / "part-3.jsonl").write_text(f"not json\n{json.dumps(bad)}\n{json.dumps(missing)}\n")
    url, alias = sqlite_url(tmp_path / "wide.db"), unique_alias("backfill")
    paths = [str(tmp_path / "part-*")]

    kw = dict(app=APP, es_url=stack.es_url, alias=alias, tombstones=TOMBSTONES)
    first = backfill(spark, paths, url, **kw)  # type: ignore[arg-type]
    _assert_store_is_oracle(url, expected)
    assert first.events == len(events) + 3 and first.applied == len(events)
    assert first.mutations == _expected_counts(history)  # version marks included
    agent_of_missing = reference_app.route(events[0]).name
    assert first.rejected == {"-": {"EventError": 2}, agent_of_missing: {"PayloadError": 1}}
    docs = run(documents(stack.es_url, alias))
    assert compare_documents(expected.documents, docs) == []  # versions are the partitions' marks
    assert first.projected is not None and first.projected["activities"]["index"] == len(expected.documents)

    state = run(read_state(url))
    second = backfill(spark, paths, url, **kw)  # type: ignore[arg-type]
    assert run(read_state(url)) == state  # same cells, same write times
    assert run(documents(stack.es_url, alias)) == docs
    assert second.mutations == first.mutations and second.rejected == first.rejected


def test_backfill_from_parquet_while_the_stream_writes_converges(
    spark: SparkSession, history: History, expected: Expected, tmp_path: Path
) -> None:
    """The stream (arrival order, small batches) and the backfill write the same rows concurrently."""
    events = list(history.events)
    (tmp_path / "archive").mkdir()
    write_parquet(events[: len(events) // 3], tmp_path / "archive" / "a.parquet")
    write_parquet(events[len(events) // 3 :], tmp_path / "archive" / "b.parquet")
    url = sqlite_url(tmp_path / "wide.db")
    run(populate(url, []))  # tables exist before either writer starts
    started, streamed = threading.Event(), threading.Event()

    def stream() -> None:
        for i in range(0, len(events), 20):
            run(populate(url, events[i : i + 20]))
            started.set()
        streamed.set()

    writer = threading.Thread(target=stream, daemon=True)
    writer.start()
    assert started.wait(60)  # the stream is under way when the backfill starts
    report = backfill(spark, [str(tmp_path / "archive")], url, app=APP, partitions=3)
    writer.join(timeout=120)
    assert streamed.is_set()
    assert report.applied == len(events) and not report.rejected
    _assert_store_is_oracle(url, expected)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    order=st.randoms(use_true_random=False),
    files=st.integers(1, 4),
    partitions=st.integers(1, 3),
    fmt=st.sampled_from(["jsonl", "parquet"]),
)
def test_backfill_in_any_split_and_order_equals_the_oracle(
    spark: SparkSession,
    history: History,
    expected: Expected,
    order: random.Random,
    files: int,
    partitions: int,
    fmt: str,
) -> None:
    """Any arrival order, file split and partitioning converges to the oracle.

    Only three examples: each one is a Spark job on a fresh store (seconds on
    two shared cores); the agents' order-independence itself is checked with
    many examples, without Spark, in tests/agents.
    """
    events = list(history.events)
    order.shuffle(events)
    work = Path(tempfile.mkdtemp(prefix="converge-backfill-"))
    try:
        cuts = sorted(order.sample(range(1, len(events)), files - 1))
        for n, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, len(events)], strict=True)):
            if fmt == "jsonl":
                write_jsonl(events[lo:hi], work / f"events-{n}.jsonl")
            else:
                write_parquet(events[lo:hi], work / f"events-{n}.parquet")
        url = sqlite_url(work / "wide.db")
        inputs = [str(work / f"events-*.{fmt}")]
        report = backfill(spark, inputs, url, app=APP, fmt=fmt, partitions=partitions)  # type: ignore[arg-type]
        assert report.applied == len(events)
        _assert_store_is_oracle(url, expected)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_cli_backfill_reports_counts_and_exits_1_on_rejects(
    spark: SparkSession, history: History, tmp_path: Path
) -> None:
    events = history.events[:200]
    write_jsonl(events, tmp_path / "events.jsonl")
    url = sqlite_url(tmp_path / "wide.db")
    args = ["spark", "backfill", str(tmp_path / "events.jsonl"), "--app", APP, "--store", url, "--quiet"]
    assert main([*args, "--report", str(tmp_path / "ok.json")]) == 0
    report = json.loads((tmp_path / "ok.json").read_text())
    assert report["events"] == report["applied"] == 200 and report["rejected"] == {}
    good = events[0].to_json().decode()
    bad_payload = json.loads(good)
    bad_payload["payload"] = {"unexpected": 1}
    lines = ["{}", "not json", json.dumps(bad_payload)]
    (tmp_path / "bad.jsonl").write_text("\n".join([*lines, good]) + "\n")
    dlq = tmp_path / "dlq"
    bad = ["spark", "backfill", str(tmp_path / "bad.jsonl"), "--app", APP, "--store", url, "--quiet"]
    bad += ["--dlq-root", str(dlq)]
    assert main([*bad, "--report", str(tmp_path / "bad.json")]) == 1
    bad_report = json.loads((tmp_path / "bad.json").read_text())
    assert bad_report["rejected"]["-"] == {"EventError": 2} and bad_report["parked"] == 3
    # rejected events are parked with their exact text, never dropped
    parked = [e.record for e in DeadLetterStore(dlq).ordered()]
    assert sorted(r.value.decode() for r in parked) == sorted(lines)  # type: ignore[union-attr]
    assert {(r.stage, r.error_class) for r in parked if r.value == b"{}"} == {("parse", "EventError")}
    (mapped,) = [r for r in parked if r.stage == "map"]
    assert mapped.pipeline.startswith("backfill:") and mapped.key == events[0].ordering_key.encode()


def test_hostile_lines_are_parked_byte_for_byte_and_the_valid_ones_applied(
    spark: SparkSession, history: History, tmp_path: Path
) -> None:
    """Issue 13: a deeply nested line, a 5,000-digit integer, bytes that are not UTF-8 and a bare
    CR inside a line are each parked exactly as archived; the 10 valid lines are all applied."""
    valid = [e.to_json() for e in history.events[:10]]
    hostile = [
        b'{"event_id":"d","payload":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"event_id":"i","version":' + b"7" * 5000 + b"}",
        b'{"event_id":"u","note":"\xff\xfe not utf-8"}',
        b'{"event_id":"r",\r"half":"line"}',
    ]
    lines = [valid[0], *hostile[:2], *valid[1:5], *hostile[2:], *valid[5:]]
    (tmp_path / "mixed.jsonl").write_bytes(b"\n".join(lines) + b"\r\n")  # a CRLF end too
    url, dlq = sqlite_url(tmp_path / "wide.db"), tmp_path / "dlq"
    args = ["spark", "backfill", str(tmp_path / "mixed.jsonl"), "--app", APP, "--store", url, "--quiet"]
    assert main([*args, "--dlq-root", str(dlq), "--report", str(tmp_path / "r.json")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["events"] == 14 and report["applied"] == 10 and report["parked"] == 4
    parked = [e.record for e in DeadLetterStore(dlq).ordered()]
    assert sorted(r.value for r in parked) == sorted(hostile)  # type: ignore[type-var]
    assert {(r.stage, r.error_class) for r in parked} == {("parse", "EventError")}
