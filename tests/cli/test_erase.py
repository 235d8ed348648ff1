"""``converge erase`` and ``converge erase verify`` on a SQLite store file and a WAL directory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from framework.cli import main
from framework.core.events import Event
from framework.runtime.mapping import map_event
from stores.open import open_wide_store
from tests.erasure.conftest import erasure_key  # noqa: F401 - the autouse key of the erasure tests
from tests.erasure.notes_app import NotesAgent, app
from tests.erasure.support import park

SPEC = "tests.erasure.notes_app:app"
EVENTS = [
    Event("e1", "k", 1, 1, "person.set", {"email": "ann@example.org", "name": "Ann", "plan": "pro"}),
    Event("e2", "k", 2, 2, "person.set", {"email": "bo@example.org", "name": "Bo", "plan": "free"}),
    Event(
        "e3", "k", 3, 3, "note.set", {"note_id": "n1", "body": "hi", "cc": "bo@example.org;ann@example.org"}
    ),
    Event("e4", "k", 4, 4, "note.set", {"note_id": "n2", "body": "yo", "cc": "bo@example.org"}),
]


async def _apply(url: str, events: list[Event]) -> None:
    store = await open_wide_store(url)
    try:
        for t in app.tables:
            await store.ensure_table(t)
        await store.apply([m for e in events for m in map_event(NotesAgent(), e)])
    finally:
        await store.close()


async def _values(url: str, table: str) -> list[dict]:
    store = await open_wide_store(url)
    try:
        return [{**r.key, **r.values()} async for r in store.scan(table)]
    finally:
        await store.close()


def test_erase_then_verify_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    dlq = tmp_path / "dlq"
    asyncio.run(_apply(url, EVENTS))
    park(dlq, EVENTS[:1])
    common = [
        "--app",
        SPEC,
        "--subject",
        "email:Ann@Example.org",
        "--wide-store",
        url,
        "--dlq-root",
        str(dlq),
    ]
    assert main(["erase", "verify", *common]) == 1
    out = capsys.readouterr().out
    assert "store" in out and "dlq" in out and "ann@" not in out.lower()
    assert main(["erase", *common, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["rows"] == {"person": 1} and dry["cells"] == {"note": 1} and dry["parked"] == 1
    assert main(["erase", "verify", *common]) == 1
    capsys.readouterr()
    assert main(["erase", *common]) == 0
    out = capsys.readouterr().out
    assert "ann@" not in out.lower() and "rows deleted      person: 1" in out
    assert main(["erase", "verify", *common]) == 0
    assert "no residue" in capsys.readouterr().out
    assert sorted(r["email"] for r in asyncio.run(_values(url, "person"))) == ["bo@example.org"]
    notes = {r["note_id"]: r for r in asyncio.run(_values(url, "note"))}
    assert "n1" not in notes  # its only cells (cc, body) are tombstoned: no live cell left
    assert notes["n2"]["cc"] == "bo@example.org"
    # the original events written again (a replay without the screen): the tombstones shadow them
    asyncio.run(_apply(url, EVENTS))
    assert main(["erase", "verify", *common]) == 0


def test_erase_refuses_without_a_key_or_a_known_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    assert main(["erase", "--app", SPEC, "--subject", "phone:123", "--wide-store", url]) == 2
    assert "phone" in capsys.readouterr().err
    monkeypatch.delenv("CONVERGE_ERASURE_KEY")
    assert main(["erase", "--app", SPEC, "--subject", "email:a@b.io", "--wide-store", url]) == 2
    err = capsys.readouterr().err
    assert "CONVERGE_ERASURE_KEY" in err and "a@b.io" not in err
