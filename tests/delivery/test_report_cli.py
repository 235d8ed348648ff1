"""Statuses, the report (text + PNG) and the ``converge delivery`` commands."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from framework.cli import main
from framework.delivery.kafka_io import RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerConfig
from framework.delivery.queries import failed_messages, messages
from framework.delivery.report import build_report, render_text, write_chart
from framework.kafka_admin import ensure_topics
from framework.local_stack import StackInfo
from stores.sqlite.store import SqliteStore
from tests.delivery.conftest import MIN, T0, Clock
from tests.delivery.kafka_consumers import event_bytes

B0 = int(T0 * 1e6)
B1 = B0 + 600_000_000


async def _five_statuses(ledger: DeliveryLedger, clock: Clock) -> None:
    """One message of each status in bucket 0, one delivered-first-time message in bucket 1."""
    for i, mid in enumerate(["first", "recovered", "failed", "retrying", "unverified"]):
        await ledger.register(mid, "exchange" if i % 2 else "google", captured_at=clock.us(i * MIN))
    await ledger.register("later", "google", captured_at=clock.us(12 * MIN))
    for mid in ("first", "recovered", "later"):
        await ledger.ack(mid, "search")
        await ledger.ack(mid, "timeline")
    await ledger.ack("failed", "search")
    by_id = {e.ref.message_id: e for e in await ledger.bucket(B0)}
    for mid in ("recovered", "failed", "retrying"):
        await ledger.record_retry(by_id[mid], by_id[mid], B0 + 2 * 600_000_000)
    await ledger.record_given_up(by_id["failed"], by_id["failed"], "failed_despite_retries")


async def test_statuses_report_counts_and_chart(ledger: DeliveryLedger, clock: Clock, tmp_path: Path) -> None:
    await _five_statuses(ledger, clock)
    clock.advance(60 * MIN)
    statuses = {m.entry.ref.message_id: m.status async for m in messages(ledger)}
    assert statuses == {
        "first": "delivered_first_time",
        "recovered": "recovered_by_retry",
        "failed": "failed_despite_retries",
        "retrying": "retrying",
        "unverified": "unverified",
        "later": "delivered_first_time",
    }
    report = await build_report(ledger)
    assert list(report.buckets) == [B0, B1]
    assert vars(report.buckets[B0]) == {
        "messages": 5, "delivered_first_time": 1, "failed_initially": 3, "recovered_by_retry": 1,
        "failed_despite_retries": 1, "retrying": 1, "unverified": 1,
    }  # fmt: skip
    assert (report.total.messages, report.total.delivered_first_time) == (6, 2)
    text = render_text(report).splitlines()
    assert text[0].split()[:2] == ["bucket", "(UTC)"]
    assert text[1].startswith("2024-01-01 00:00") and text[-1].split() == [
        "total",
        "6",
        "2",
        "3",
        "1",
        "1",
        "1",
        "1",
    ]
    only_google = await build_report(ledger, source="google")
    assert only_google.total.messages == 4

    png = write_chart(report, tmp_path / "out" / "report.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(png).shape[2] in (3, 4)
    empty = write_chart(await build_report(ledger, since=B1 + 600_000_000), tmp_path / "empty.png")
    assert empty.stat().st_size > 0


async def test_failed_query_filters(ledger: DeliveryLedger, clock: Clock) -> None:
    await _five_statuses(ledger, clock)
    clock.advance(60 * MIN)
    ids = lambda found: sorted(m.entry.ref.message_id for m in found)  # noqa: E731
    assert ids(await failed_messages(ledger)) == ["failed", "retrying", "unverified"]
    assert ids(await failed_messages(ledger, consumer="search")) == ["retrying", "unverified"]
    assert ids(await failed_messages(ledger, source="exchange")) == ["retrying"]
    assert ids(await failed_messages(ledger, since=B0 + 2 * 60_000_000, until=B0 + 4 * 60_000_000)) == [
        "failed", "retrying",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        await failed_messages(ledger, consumer="billing")
    with pytest.raises(ValueError):
        await failed_messages(ledger, since=B1, until=B0)


def _real_ledger(path: Path) -> tuple[SqliteStore, DeliveryLedger]:
    store = SqliteStore(path)
    return store, DeliveryLedger(store, LedgerConfig(consumers=("search", "timeline")))


def test_cli_failed_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wide.db"
    now_us = int(time.time() * 1e6)

    async def setup() -> None:
        store, ledger = _real_ledger(db)
        await ledger.ensure()
        for i, mid in enumerate(["a", "b", "c"]):
            await ledger.register(
                mid, "exchange" if mid != "c" else "google", captured_at=now_us - (50 - i) * 60_000_000
            )
        await ledger.ack("a", "search")
        await ledger.ack("a", "timeline")
        await ledger.ack("b", "timeline")
        await store.close()

    asyncio.run(setup())
    url = f"sqlite:///{db}"  # an absolute path: sqlite:////tmp/...
    assert main(["delivery", "failed", "--wide-store", url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["message_id"], r["missing"], r["status"]) for r in rows] == [
        ("b", ["search"], "unverified"), ("c", ["search", "timeline"], "unverified"),
    ]  # fmt: skip
    assert (
        main(["delivery", "failed", "--wide-store", url, "--consumer", "timeline", "--source", "google"]) == 0
    )
    out = capsys.readouterr().out
    assert (
        " c " in out
        and " b " not in out
        and out.strip().endswith("1 message(s) not delivered to every consumer")
    )
    png = tmp_path / "chart.png"
    assert main(["delivery", "report", "--wide-store", url, "--png", str(png), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["messages"] == 3 and report["total"]["delivered_first_time"] == 1
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["delivery", "failed", "--wide-store", url, "--consumer", "billing"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line, naming the unknown consumer
    # the shared time rule: epoch seconds, ISO-8601 or "N ago" (converted to the ledger's microseconds);
    # a, b, c were captured 50, 49 and 48 minutes ago (a is delivered)
    between = now_us / 1e6 - 49.5 * 60
    iso = datetime.fromtimestamp(between, UTC).isoformat()
    windows = {
        ("--since", str(int(between))): ["b", "c"],
        ("--since", iso): ["b", "c"],
        ("--since", "49.5m ago"): ["b", "c"],
        ("--since", "51m ago", "--until", "48.5m ago"): ["b"],
        ("--until", "2h ago"): [],
    }
    for window, expected in windows.items():
        assert main(["delivery", "failed", "--wide-store", url, "--json", *window]) == 0
        assert [r["message_id"] for r in json.loads(capsys.readouterr().out)] == expected, window
    with pytest.raises(SystemExit) as bad_time:
        main(["delivery", "failed", "--wide-store", url, "--since", "not-a-time"])
    assert bad_time.value.code == 2 and "not a time: 'not-a-time'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # microseconds, the old unit, are refused rather than misread
        main(["delivery", "failed", "--wide-store", url, "--since", str(now_us)])
    assert "epoch SECONDS expected" in capsys.readouterr().err
    assert main(["delivery", "failed", "--wide-store", url, "--table", "other_ledger"]) == 2
    assert "no ledger table 'other_ledger'" in capsys.readouterr().err
    relative = f"sqlite://{db}"  # = sqlite:///tmp/...: a RELATIVE path (SQLAlchemy's rule), not the file
    assert main(["delivery", "report", "--wide-store", relative]) == 2
    assert f"--wide-store: {str(db).lstrip('/')} does not exist" in capsys.readouterr().err


def test_cli_verify_retries_then_is_idempotent(
    stack: StackInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, topic = tmp_path / "wide.db", f"cli-{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(stack.kafka_bootstrap, {topic: 1}))

    async def setup() -> None:
        store, ledger = _real_ledger(db)
        await ledger.ensure()
        publisher = RecordPublisher(stack.kafka_bootstrap)
        captured = int((time.time() - 40 * 60) * 1e6)  # in a bucket that ended well over the grace ago
        for mid in ("x", "y"):
            await ledger.register(mid, "s", captured_at=captured)
            loc = await publisher.publish(topic, mid.encode(), event_bytes(mid, 1))
            await ledger.register(mid, "s", captured_at=captured, location=loc)
        await ledger.ack("x", "search")
        await ledger.ack("x", "timeline")
        await publisher.close()
        await store.close()

    asyncio.run(setup())
    args = ["delivery", "verify", "--wide-store", f"sqlite:///{db}", "--broker", stack.kafka_bootstrap,
            "--checkpoints", f"sqlite:///{tmp_path / 'cp.db'}", "--max-retries", "1", "--ttl-days", "1",
            "--json"]  # fmt: skip
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["retried"] == [["y", 1]] and first["given_up"] == [] and first["errors"] == []
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["retried"] == [] and second["checkpoint_before"] == second["checkpoint_after"]
