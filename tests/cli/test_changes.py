"""``converge changes read`` and ``reset`` on a SQLite store and checkpoint file."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from framework.cli import main
from framework.core.events import Event
from framework.core.mutations import Upsert
from framework.core.schema import Column, TableSchema
from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
from framework.notifications.sink import NotificationSink
from stores.sqlite import SqliteStore

T = TableSchema(
    "t", partition_key=(Column("org_id", "text"), Column("id", "text")), columns=(Column("v", "bigint"),)
)


async def _write(path: Path, batches: list[list[str]], ago: float) -> None:
    store = await SqliteStore.open(path)
    try:
        for schema in (T, *NOTIFICATION_TABLES):
            await store.ensure_table(schema)
        sink = NotificationSink(
            store,
            "app",
            NotificationConfig(count_inserts=True),
            prefix="agent",
            clock=lambda: time.time() - ago,
        )
        for n, ids in enumerate(batches):
            batch = [
                (
                    Event(f"e{n}-{i}", i, 1, 1, "x", {}),
                    [Upsert("t", {"org_id": "o", "id": i}, {"v": n}, n + 1)],
                )
                for i in ids
            ]
            await sink.write_batch(batch)
    finally:
        await store.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_read_then_commit_then_nothing_new(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wide.db"
    asyncio.run(_write(db, [["a", "b"], ["c"]], ago=60))
    store = ["--wide-store", f"sqlite:///{db}"]
    status, out, _ = run(capsys, "changes", "read", "--consumer", "snap", *store, "--json")
    got = json.loads(out)
    assert status == 0 and got["committed"] is None
    assert [sorted(k["id"] for k in e["keys"]) for e in got["entries"]] == [["a", "b"], ["c"]]
    assert got["entries"][0]["inserted"] == 2 and got["entries"][0]["tenant"] == "o"
    status, out, _ = run(capsys, "changes", "read", "--consumer", "snap", *store, "--limit", "1", "--commit")
    assert status == 0 and "+2 ~0 -0  2 keys" in out and "1 entries for consumer snap: committed" in out
    assert (tmp_path / "checkpoints.db").exists()  # beside the SQLite store by default
    status, out, _ = run(capsys, "changes", "read", "--consumer", "snap", *store, "--json", "--commit")
    assert [e["keys"][0]["id"] for e in json.loads(out)["entries"]] == ["c"]
    status, out, _ = run(capsys, "changes", "read", "--consumer", "snap", *store)
    assert status == 0 and "0 entries for consumer snap: none" in out


def test_settle_hides_entries_younger_than_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wide.db"
    asyncio.run(_write(db, [["a"]], ago=10))
    store = ["--wide-store", f"sqlite:///{db}", "--json"]
    assert json.loads(run(capsys, "changes", "read", "--consumer", "c", *store)[1])["entries"] == []
    got = json.loads(run(capsys, "changes", "read", "--consumer", "c", *store, "--settle", "5s")[1])
    assert len(got["entries"]) == 1


def test_a_consumer_behind_the_retention_gets_a_gap_then_resets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "wide.db"
    asyncio.run(_write(db, [["a"]], ago=60))
    store = ["--wide-store", f"sqlite:///{db}"]
    assert run(capsys, "changes", "reset", "--consumer", "late", *store, "--to", "8d ago")[0] == 0
    status, out, err = run(capsys, "changes", "read", "--consumer", "late", *store)
    assert status == 3 and out == ""
    assert "'late' fell behind the notification retention" in err
    assert "converge changes reset --consumer late" in err
    status, out, _ = run(capsys, "changes", "reset", "--consumer", "late", *store, "--to", "2m ago")
    assert status == 0 and "now reads entries ingested after" in out
    status, out, _ = run(capsys, "changes", "read", "--consumer", "late", *store, "--json")
    assert status == 0 and len(json.loads(out)["entries"]) == 1


def test_a_missing_store_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(
        capsys, "changes", "read", "--consumer", "c", "--wide-store", f"sqlite:///{tmp_path}/no.db"
    )
    assert status == 2 and err.count("\n") == 1 and "does not exist" in err
