"""Issue 22 follow-up in batch: ``converge spark backfill``'s function over one archive of 300
support-desk histories with disjoint tickets and conversations, in which claims move
conversations (and their replies) between tickets, delivered shuffled, duplicated and with a
replayed tail. Per history the store holds what the model here says (every ticket's version mark
is the highest version of its own ticket events, never a join's write version; every reply under
its conversation's final ticket at the join's version), and what the test kit's driver stores on
the same delivery (the stream: replies mapped early and moved)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from examples.support_desk.app import app
from examples.support_desk.identity import TicketRef
from framework import Event
from framework.testing import Driver
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.examples.support_desk.test_mail_moves import claim, created, reply
from tests.spark.support import run, sqlite_url
from tests.state import join_model as model

SPEC = "examples.support_desk.app:app"
TABLES = ("ticket_comment", "tickets_version")
Rows = dict[tuple[str, tuple[Any, ...]], dict[str, tuple[Any, int]]]


def history(rng: random.Random, h: int) -> tuple[list[Event], Rows]:
    """One history under tickets and conversations of its own: its events and the model's rows."""
    tickets = [TicketRef("acme", "zendesk", f"h{h}-{n}") for n in range(3)]
    convs = [f"h{h}-thread-{n}" for n in range(2)]
    events = [created(ref, rng.randint(1, 60), rng.choice([None, *convs])) for ref in tickets]
    seen = {(e.ordering_key, e.version) for e in events}
    for _ in range(rng.randint(1, 4)):
        ref, v = rng.choice(tickets), rng.randint(1, 60)
        if (ref.ordering_key, v) not in seen:  # one event per ticket and version
            seen.add((ref.ordering_key, v))
            events.append(claim(ref, v, rng.choice(convs)))
    claims = {c: [(e.version, TicketRef.parse(e.ordering_key)) for e in events
                  if e.payload.get("conversation_id") == c] for c in convs}  # fmt: skip
    rows: Rows = {}
    for ref in tickets:
        own = max(e.version for e in events if e.ordering_key == ref.ordering_key)
        rows[("tickets_version", (ref.ticket_id,))] = {"version": (own, own)}
    for n in range(rng.randint(1, 4)):
        conv = rng.choice([c for c in convs if claims[c]] or [None])
        if conv is None:
            break
        r = reply(f"h{h}-m{n}", rng.randint(1, 60), conv)
        events.append(r)
        final = max(claims[conv], key=lambda vc: model.entry_order(vc[0], dict(vc[1].cells)))
        w = r.version  # the backfill maps each reply once: at its own version
        key = (final[1].ticket_id, r.occurred_at, r.payload["message_id"])
        rows[("ticket_comment", key)] = {"author_kind": ("requester", w), "body": (r.payload["body"], w)}
    return events, rows


async def _rows(url: str) -> Rows:
    store = await open_wide_store(url)
    try:
        out: Rows = {}
        for table in TABLES:
            async for r in store.scan(table):
                out[(table, tuple(r.key.values()))] = {c: (x.value, x.writetime) for c, x in r.cells.items()}
        return out
    finally:
        await store.close()


def test_the_backfill_leaves_each_tickets_mark_and_replies_as_the_model(
    spark: SparkSession, tmp_path: Path
) -> None:
    rng = random.Random(2223)
    expected: Rows = {}
    archive_events: list[Event] = []
    for h in range(300):
        events, rows = history(rng, h)
        expected.update(rows)
        archive_events += [e for e in events for _ in range(rng.randint(1, 2))]
    rng.shuffle(archive_events)
    archive_events += archive_events[-rng.randint(1, 50) :]  # a replayed tail
    assert sum(t == "ticket_comment" for t, _ in expected) > 300
    with Driver(app) as d:  # the stream on the same delivery: replies mapped early are moved
        assert d.send(archive_events) == []
        assert all(items == [] for items in d.pending().values())
        streamed = {(t, tuple(r.key.values())): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                    for t in TABLES for r in d.rows(t)}  # fmt: skip
    # the stream: the same values, each reply at its version plus one per claim that moved it
    assert streamed == {k: {c: (x, model.Near(w, 60) if k[0] == "ticket_comment" else w)
                            for c, (x, w) in cells.items()} for k, cells in expected.items()}  # fmt: skip
    archive = tmp_path / "mail_moves.jsonl"
    write_jsonl(archive_events, archive)
    url = sqlite_url(tmp_path / "mail_moves.db")
    report = backfill(spark, [str(archive)], url, app=SPEC, partitions=3)
    assert not report.rejected
    assert run(_rows(url)) == expected
