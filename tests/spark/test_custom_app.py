"""The batch jobs run any app: a small ticketing app, declared here, through backfill, check, repair, reindex.

Its tables, state log, projections (two, with their own aliases, mappings
and document ids) and agent share nothing with the reference platform; the
jobs load it by ``tests.spark.test_custom_app:app`` like any app. An
oracle computed from the events alone says what the index must hold.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pyspark.sql import SparkSession

from framework import (
    App,
    Column,
    Delete,
    Event,
    KeyedAgent,
    LogState,
    Projection,
    Row,
    TableSchema,
    Upsert,
    current_state,
    state_log_schema,
)
from framework.cli import main
from framework.dlq import DeadLetterStore
from framework.local_stack import StackInfo
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from spark_batch.convergence import CATEGORIES, check
from spark_batch.io import open_index
from tests.spark.support import TOMBSTONES, documents, run, sqlite_url

SPEC = "tests.spark.test_custom_app:app"
TICKET_KEY = (Column("ticket_id", "text"),)
TICKETS = TableSchema(
    "tickets",
    TICKET_KEY,
    (Column("kind", "text"), Column("subject", "text"), Column("score", "double"), Column("priority", "int")),
)
TICKET_STATES = state_log_schema("ticket_states", TICKET_KEY, attrs=(Column("agent", "text"),))
STATES = ("new", "open", "solved")  # precedence on a tie of ``at``
SEARCH_ALIAS, TITLES_ALIAS = "tickets-search", "ticket-titles"


class TicketAgent(KeyedAgent):
    """Ticket events to mutations; ``ticket.boom`` raises (a bug in ``handle`` is a bad message)."""

    name: ClassVar[str] = "tickets"
    topic: ClassVar[str] = "ticket-events"
    event_types: ClassVar[tuple[str, ...]] = (
        "ticket.set",
        "ticket.clear",
        "ticket.erase",
        "ticket.state",
        "ticket.boom",
    )
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKETS, TICKET_STATES)

    def handle(self, event: Event) -> Iterable[Any]:
        p, v = event.payload, event.version
        key = {"ticket_id": p["ticket_id"]}
        if event.type == "ticket.set":
            return [Upsert(TICKETS.name, key, p["cells"], v)]
        if event.type == "ticket.clear":
            return [Delete(TICKETS.name, key, v, columns=tuple(p["columns"]))]
        if event.type == "ticket.erase":
            return [Delete(TICKETS.name, key, v)]
        if event.type == "ticket.state":
            attrs = {"agent": p["agent"]}
            return [LogState(TICKET_STATES.name, key, p["state"], p["at"], event.event_id, v, attrs=attrs)]
        raise RuntimeError(f"boom on {p['ticket_id']}")


class TicketSearch(Projection):
    """Ticket row + current state; documents ``T-<ticket_id>``."""

    name: ClassVar[str] = "ticket_search"
    alias: ClassVar[str] = SEARCH_ALIAS
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKETS, TICKET_STATES)
    mappings: ClassVar[Mapping[str, Any]] = {
        "properties": {
            "ticket": {"type": "keyword"},
            "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
            "kind": {"type": "keyword"},
            "score": {"type": "double"},
            "priority": {"type": "integer"},
            "status": {"type": "keyword"},
        }
    }

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        ticket = [r for r in rows[TICKETS.name] if r.cells]
        if not ticket:
            return None
        doc = _fields(key, ticket[0].values())
        state = current_state(rows[TICKET_STATES.name], STATES)
        if state is not None:
            doc["status"] = state.state
        return doc

    def document_id(self, key: Mapping[str, Any]) -> str:
        return f"T-{key['ticket_id']}"


class TicketTitles(Projection):
    """Titles only: a ticket without a live subject has no document."""

    name: ClassVar[str] = "ticket_titles"
    alias: ClassVar[str] = TITLES_ALIAS
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKETS,)
    mappings: ClassVar[Mapping[str, Any]] = {"properties": {"title": {"type": "text"}}}

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        values = rows[TICKETS.name][0].values() if rows[TICKETS.name] else {}
        return {"title": values["subject"]} if "subject" in values else None


app = App("ticketing", agents=[TicketAgent()], projections=[TicketSearch(), TicketTitles()])


def _fields(key: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"ticket": key["ticket_id"]}
    names = {"subject": "title", "kind": "kind", "score": "score", "priority": "priority"}
    doc.update({names[c]: v for c, v in values.items()})
    return doc


# -- events and their oracle ---------------------------------------------------------------------
def event(ticket: str, kind: str, version: int, **payload: Any) -> Event:
    return Event(
        f"{ticket}-{version}", ticket, version, version, f"ticket.{kind}", {"ticket_id": ticket, **payload}
    )


def history(seed: int, tickets: int) -> list[Event]:
    """Random ticket lives (unique versions per ticket), replayed in part and shuffled."""
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(tickets):
        t = f"t{i:03d}"
        for n, version in enumerate(sorted(rng.sample(range(100, 10_000), rng.randint(1, 6)))):
            roll = rng.random()
            if n == 0 or roll < 0.45:
                cells: dict[str, Any] = {
                    "kind": rng.choice(["bug", "question"]),
                    "subject": f"{t} #{version}",
                }
                cells.update(
                    {"score": rng.random()} if rng.random() < 0.5 else {"priority": rng.randint(1, 4)}
                )
                events.append(
                    event(t, "set", version, cells=dict(rng.sample(sorted(cells.items()), rng.randint(1, 3))))
                )
            elif roll < 0.6:
                events.append(
                    event(t, "clear", version, columns=rng.sample(["subject", "score", "priority"], 1))
                )
            elif roll < 0.67:
                events.append(event(t, "erase", version))
            else:
                at = rng.randint(0, 50)
                events.append(event(t, "state", version, state=rng.choice(STATES), at=at, agent=f"a{at % 3}"))
    for v in (5, 9):  # a ticket with states only: rows and marks, but no document
        events.append(event("t-states", "state", v, state="open", at=v, agent="a0"))
    events += rng.sample(events, len(events) // 5)  # replays
    rng.shuffle(events)
    return events


def oracle(events: Iterable[Event]) -> dict[str, dict[str, tuple[dict[str, Any], int]]]:
    """alias -> doc_id -> (document, version), from the events alone (no store, no agent)."""
    by_ticket: dict[str, dict[int, Event]] = {}
    for e in events:
        by_ticket.setdefault(e.payload["ticket_id"], {})[e.version] = e
    search: dict[str, tuple[dict[str, Any], int]] = {}
    titles: dict[str, tuple[dict[str, Any], int]] = {}
    for t, evs in by_ticket.items():
        cells: dict[str, tuple[int, Any]] = {}
        tomb: dict[str, int] = {}
        states: list[tuple[int, int, str]] = []
        for v, e in sorted(evs.items()):
            if e.type == "ticket.set":
                cells.update({c: (v, val) for c, val in e.payload["cells"].items()})
            elif e.type == "ticket.clear":
                tomb.update({c: v for c in e.payload["columns"]})
            elif e.type == "ticket.erase":
                tomb.update({c: v for c in ("kind", "subject", "score", "priority")})
            else:
                states.append((e.payload["at"], STATES.index(e.payload["state"]), e.event_id))
        live = {c: val for c, (v, val) in cells.items() if v > tomb.get(c, -1)}
        if not live:
            continue
        doc = _fields({"ticket_id": t}, live)
        if states:
            doc["status"] = STATES[max(states)[1]]
        search[f"T-{t}"] = (doc, max(evs))
        row_versions = [v for v, e in evs.items() if e.type != "ticket.state"]
        if "subject" in live:
            titles[t] = ({"title": live["subject"]}, max(row_versions))
    return {SEARCH_ALIAS: search, TITLES_ALIAS: titles}


# -- fixtures ------------------------------------------------------------------------------------
async def _drop_indices(es_url: str) -> None:
    index = open_index(es_url, TOMBSTONES)
    try:
        for alias in (SEARCH_ALIAS, TITLES_ALIAS):
            for gen in range(1, 4):
                if await index.client.indices.exists(index=f"{alias}-v{gen}"):
                    await index.client.indices.delete(index=f"{alias}-v{gen}")
    finally:
        await index.close()


@pytest.fixture()
def es(stack: StackInfo) -> str:
    """The embedded index without this app's indices (the aliases are the app's own, fixed names)."""
    run(_drop_indices(stack.es_url))
    return stack.es_url


def _get(es_url: str, alias: str, doc_id: str) -> Any:
    async def get() -> Any:
        index = open_index(es_url, TOMBSTONES)
        try:
            return await index.get(alias, doc_id)
        finally:
            await index.close()

    return run(get())


# -- tests ---------------------------------------------------------------------------------------
def test_document_version_covers_a_column_delete(spark: SparkSession, es: str, tmp_path: Path) -> None:
    """The score's delete leaves no live cell at 25; the document still carries version 25."""
    write_jsonl(
        [
            event("cd1", "set", 20, cells={"kind": "bug", "subject": "Login fails"}),
            event("cd1", "set", 22, cells={"score": 0.5}),
            event("cd1", "clear", 25, columns=["score"]),
        ],
        tmp_path / "events.jsonl",
    )
    url = sqlite_url(tmp_path / "wide.db")
    report = backfill(
        spark, [str(tmp_path / "events.jsonl")], url, app=SPEC, es_url=es, tombstones=TOMBSTONES
    )
    assert report.applied == 3 and not report.rejected
    assert report.projected == {"ticket_search": {"index": 1}, "ticket_titles": {"index": 1}}
    hit = _get(es, SEARCH_ALIAS, "T-cd1")
    assert hit.source == {"ticket": "cd1", "kind": "bug", "title": "Login fails"} and hit.version == 25
    assert _get(es, TITLES_ALIAS, "cd1").version == 25
    for projection in ("ticket_search", "ticket_titles"):
        found = check(
            spark,
            app=SPEC,
            projection=projection,
            store_url=url,
            es_url=es,
            tombstones=TOMBSTONES,
            shards=2,
            slices=2,
        )
        found.release()
        assert found.report.clean and found.report.expected_docs == 1, found.report.to_dict()


async def _corrupt(es_url: str, expected: dict[str, tuple[dict[str, Any], int]]) -> dict[str, list[str]]:
    """Damage the search index behind the pipeline's back; the doc ids per category."""
    ids = sorted(expected)
    keys = {
        "missing": ids[0:2],
        "stale": ids[2:4],
        "content": ids[4:6],
        "orphaned": ["T-ghost", "T-t-states"],
    }
    index = open_index(es_url, TOMBSTONES)
    try:
        for doc_id in keys["missing"] + keys["stale"]:
            await index.client.delete(index=f"{SEARCH_ALIAS}-v1", id=doc_id)
        for doc_id in keys["stale"]:
            doc, version = expected[doc_id]
            assert await index.index(SEARCH_ALIAS, doc_id, doc, version - 1)
        for doc_id in keys["content"]:
            doc, version = expected[doc_id]
            assert await index.index(SEARCH_ALIAS, doc_id, {**doc, "title": "tampered"}, version)
        for doc_id in keys["orphaned"]:  # no partition at all; a partition whose build gives no document
            assert await index.index(SEARCH_ALIAS, doc_id, {"ticket": doc_id}, 1_000)
    finally:
        await index.close()
    return keys


def test_custom_app_backfill_check_repair_and_reindex(spark: SparkSession, es: str, tmp_path: Path) -> None:
    events = history(3, 40)
    expected = oracle(events)
    good = [e.to_json().decode() for e in events]
    bad = [
        "not json",
        json.dumps(event("t900", "boom", 7).to_dict()),
        json.dumps(event("t901", "nope", 7).to_dict()),
    ]
    (tmp_path / "events.jsonl").write_text("\n".join(good + bad) + "\n")
    url = sqlite_url(tmp_path / "wide.db")
    dlq = tmp_path / "dlq"
    common = ["--app", SPEC, "--store", url, "--es-url", es, "--tombstones", TOMBSTONES, "--quiet"]
    report = tmp_path / "report.json"

    args = ["spark", "backfill", str(tmp_path / "events.jsonl"), "--project", "--dlq-root", str(dlq)]
    assert main([*args, *common, "--report", str(report)]) == 1  # rejects
    filled = json.loads(report.read_text())
    assert filled["applied"] == len(good) and filled["parked"] == 3
    assert filled["rejected"] == {"-": {"EventError": 2}, "tickets": {"RuntimeError": 1}}
    parked = {r.record.value.decode(): r.record for r in DeadLetterStore(dlq).ordered()}  # type: ignore[union-attr]
    assert parked[bad[1]].stage == "map" and parked[bad[1]].error_class == "RuntimeError"
    assert parked[bad[2]].stage == "route" and parked[bad[0]].stage == "parse"
    for alias, docs in expected.items():
        assert run(documents(es, alias)) == docs

    checking = ["spark", "check", *common, "--shards", "2", "--slices", "2", "--sample", "50"]
    assert main([*checking, "--report", str(report)]) == 0
    clean = json.loads(report.read_text())
    assert {p: r["check"]["clean"] for p, r in clean.items()} == {
        "ticket_search": True,
        "ticket_titles": True,
    }
    assert clean["ticket_titles"]["check"]["expected_docs"] == len(expected[TITLES_ALIAS])

    keys = run(_corrupt(es, expected[SEARCH_ALIAS]))
    assert main([*checking, "--report", str(report)]) == 1
    found = json.loads(report.read_text())["ticket_search"]["check"]
    assert found["counts"] == {c: len(keys.get(c, [])) for c in CATEGORIES}
    assert {c: found["samples"][c] for c in keys} == {c: sorted(v) for c, v in keys.items()}
    assert main([*checking, "--projection", "ticket_search", "--repair", "--report", str(report)]) == 0
    repaired = json.loads(report.read_text())["ticket_search"]
    assert repaired["check"]["repair"]["actions"] == {"index": 6, "delete": 2}
    assert repaired["after_repair"]["clean"]
    assert run(documents(es, SEARCH_ALIAS)) == expected[SEARCH_ALIAS]

    reindexing = ["spark", "reindex", *common, "--projection", "ticket_search", "--shards", "2"]
    assert main([*reindexing, "--report", str(report)]) == 0
    rebuilt = json.loads(report.read_text())
    assert rebuilt["new_index"] == f"{SEARCH_ALIAS}-v2" and rebuilt["built"] == {
        "ok": len(expected[SEARCH_ALIAS])
    }
    assert run(documents(es, SEARCH_ALIAS)) == expected[SEARCH_ALIAS]

    async def served() -> tuple[list[str], dict[str, Any]]:
        index = open_index(es, TOMBSTONES)
        try:
            mapping = (await index.client.indices.get_mapping(index=f"{SEARCH_ALIAS}-v2")).body
            return await index.alias_indices(SEARCH_ALIAS), mapping[f"{SEARCH_ALIAS}-v2"]["mappings"]
        finally:
            await index.close()

    indices, mappings = run(served())
    assert indices == [f"{SEARCH_ALIAS}-v2"]
    assert mappings["properties"]["title"]["fields"]["raw"]["type"] == "keyword"  # the projection's own
    assert main([*checking, "--report", str(report)]) == 0


def test_jobs_refuse_what_they_cannot_run_before_spark_starts(
    es: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad app, not an App, unknown or ambiguous projection, missing tables: one line, exit status 2."""
    empty = sqlite_url(tmp_path / "empty.db")
    run(_ensure_nothing(empty))
    check_args = ["spark", "check", "--store", empty, "--es-url", es, "--quiet"]
    missing = "tests.spark.no_such_module:app"
    cases = [
        (["--app", missing], f"cannot load app '{missing}': ModuleNotFoundError"),
        (["--app", "tests.spark.test_custom_app:TICKETS"], "is not a converge App (got TableSchema)"),
        (["--app", SPEC, "--projection", "nope"], "has no projection 'nope' (projections: ticket_search, "),
        (["--app", SPEC], f"store {empty} has no table 'tickets' (projection ticket_search)"),
        (["--app", SPEC, "--alias", "x"], "--alias names the index of one projection"),
    ]
    for extra, message in cases:
        assert main([*check_args, *extra]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("converge spark check: error: ") and message in line, line
    assert main(["spark", "reindex", "--app", SPEC, "--store", empty, "--es-url", es]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "several projections (ticket_search, ticket_titles): choose one with --projection" in line
    assert main(["spark", "backfill", str(tmp_path / "none-*.jsonl"), "--app", SPEC, "--store", empty]) == 2
    assert "no input matches" in capsys.readouterr().err

    # a real process: one line on stderr, exit status 2, no Spark started
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", *check_args, "--app", missing],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and time.monotonic() - started < 30
    assert done.stderr.strip().splitlines() == [
        f"converge spark check: error: cannot load app '{missing}': "
        "ModuleNotFoundError: No module named 'tests.spark.no_such_module'"
    ]


async def _ensure_nothing(url: str) -> None:
    """Create an empty store file (no tables declared)."""
    from stores.open import open_wide_store

    store = await open_wide_store(url)
    await store.close()
