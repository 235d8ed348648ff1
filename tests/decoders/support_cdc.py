"""The support desk plugged onto a CDC topic of its helpdesk's ``tickets`` table, and a history for it.

``history(seed)`` plays transactions on a model of the table (inserts, updates, deletes,
re-inserts, a row changed twice in one transaction) and records what Debezium would put on the
topic: every live change at its LSN and commit millisecond, the tombstone after each delete, and
a snapshot taken part-way whose rows are read while later transactions commit (so some snapshot
rows are read after a live change that supersedes them). Its ``truth`` is the table at the end;
its ``events`` are the same history in converge's envelope (the live changes, in commit order).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from examples.support_desk.identity import TicketRef, ticket_id
from examples.support_desk.projection import TicketProjection
from examples.support_desk.schemas import RECORD_COLUMNS, TICKET
from framework import App, Delete, Event, KeyedAgent, TableSchema, Upsert
from framework.decoders import CdcDecoder, Record
from framework.decoders.cloudevents import CloudEventsDecoder
from stores.open import open_wide_store

TOPIC_CDC = "helpdesk.public.tickets"
TOPIC_ROWS = "support.ticket_rows"
KEY_COLUMNS = ("tenant", "source", "external_id")
DECODER = CdcDecoder("ticket", key_columns=KEY_COLUMNS)
T0_MS = 1_700_000_000_000
SPEC = "tests.decoders.support_cdc:app"


class TicketRowAgent(KeyedAgent):
    """The helpdesk's ticket rows (envelope form): an image is the row's record cells, a delete
    removes the row, a tombstone is nothing."""

    name: ClassVar[str] = "ticket-rows"
    topic: ClassVar[str] = TOPIC_ROWS
    event_types: ClassVar[tuple[str, ...]] = DECODER.event_types
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)

    def handle(self, event: Event) -> Iterable[Upsert | Delete]:
        ref = TicketRef.parse(event.ordering_key)
        kind = event.type.split(".", 1)[1]
        if kind == "tombstone":
            return []
        if kind == "delete":
            return [Delete(TICKET.name, ref.key, event.version)]
        row = event.payload["after"]
        return [
            Upsert(
                TICKET.name, ref.key, {**ref.cells, **{c: row.get(c) for c in RECORD_COLUMNS}}, event.version
            )
        ]


class TicketCdcAgent(TicketRowAgent):
    """The same mapping on the CDC topic, through the CDC decoder."""

    name: ClassVar[str] = "ticket-cdc"
    topic: ClassVar[str] = TOPIC_CDC
    decoder = DECODER


app = App("support-desk-cdc", agents=[TicketCdcAgent()], projections=[TicketProjection()])
envelope_app = App("support-desk-rows", agents=[TicketRowAgent()], projections=[TicketProjection()])


@dataclass
class History:
    records: list[Record] = field(default_factory=list)
    #: what a topic holds whose connector started with the snapshot: its rows, then later changes
    since_snapshot: list[Record] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)


def _key(row: dict[str, Any]) -> dict[str, Any]:
    return {c: row[c] for c in KEY_COLUMNS}


def change_value(op: str, before: Any, after: Any, ts_ms: int, lsn: int, order: int, snapshot: str = "false",
                 wrap: bool = False) -> bytes:  # fmt: skip
    """A Debezium change event's value (JSON; ``wrap``: in the JSON converter's schema wrapper)."""
    value = {
        "before": before, "after": after, "op": op, "ts_ms": ts_ms + 7,
        "source": {"connector": "postgresql", "name": "helpdesk", "ts_ms": ts_ms, "snapshot": snapshot,
                   "db": "helpdesk", "schema": "public", "table": "tickets", "lsn": lsn},
        "transaction": None if op == "r" else {"id": f"tx{lsn}", "total_order": order},
    }  # fmt: skip
    return json.dumps({"schema": {"type": "struct"}, "payload": value} if wrap else value).encode()


def history(seed: int, tickets: int = 14, transactions: int = 60) -> History:
    rng = random.Random(seed)
    h = History()
    table: dict[tuple[str, ...], dict[str, Any]] = {}
    ids = [(f"t{i % 2}", rng.choice(["zendesk", "freshdesk"]), f"{100 + i}" + ("/x" if i % 5 == 0 else ""))
           for i in range(tickets)]  # fmt: skip
    lsn, offset, ms = 1000, 0, T0_MS
    snapshot_at = transactions // 2
    snapshot: list[dict[str, Any]] = []
    ident = ids[0]

    def emit(key: dict[str, Any], value: bytes | None) -> None:
        nonlocal offset
        h.records.append(Record(json.dumps(key).encode(), value, TOPIC_CDC, 0, offset, ms))
        offset += 1

    for tx in range(transactions):
        if tx == snapshot_at:
            snapshot = [dict(row) for row in table.values()]
            snapshot_lsn, snapshot_ms, snapshot_offset = lsn, ms, offset
        ms += rng.choice([1, 1, 2, 40, 900])
        changes = rng.choice([1, 1, 2, 3])
        for order in range(1, changes + 1):
            if order == 1 or rng.random() < 0.5:  # else the same row again, in the same transaction
                ident = rng.choice(ids)
            key = dict(zip(KEY_COLUMNS, ident, strict=True))
            before = table.get(ident)
            lsn += rng.randint(1, 50)
            if before is None:
                op, after = "c", {**key, "subject": f"s{tx}", "requester_email": f"r{tx}@x.io",
                                  "requester_name": f"R {tx}", "priority": rng.choice(["low", "high"]),
                                  "assignee": rng.choice([None, "ann"]), "created_at": ms * 1000}  # fmt: skip
            elif rng.random() < 0.2:
                op, after = "d", None
            else:
                op, after = "u", {**before, "subject": f"s{tx}.{order}", "assignee": rng.choice([None, "cy"])}
            value = change_value(op, before, after, ms, lsn, order, wrap=rng.random() < 0.3)
            emit(key, value)
            h.events.append(DECODER.decode(h.records[-1]))
            if op == "d":
                del table[ident]
                emit(key, None)  # the tombstone after a delete
            else:
                table[ident] = after  # type: ignore[assignment]
    # the snapshot's rows are read while the transactions after it commit: each row is read at a
    # time after the snapshot's position, some after live changes that supersede it
    for i, row in enumerate(snapshot):
        read_ms = snapshot_ms + 1 + i * 37
        emit(_key(row), change_value("r", None, row, read_ms, snapshot_lsn, 0, snapshot="true"))
    h.since_snapshot = h.records[-len(snapshot) :] + h.records[snapshot_offset : -len(snapshot)]
    for row in table.values():
        tid = ticket_id(row["tenant"], row["source"], row["external_id"])
        h.truth[tid] = {
            c: v for c, v in row.items() if v is not None and (c in RECORD_COLUMNS or c in KEY_COLUMNS)
        }
    return h


async def store_table(url: str) -> dict[str, dict[str, Any]]:
    """The live cells of every ``ticket`` row of the store at ``url``, by ticket id."""
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan(TICKET.name)]
    finally:
        await store.close()
    return {str(r.key["ticket_id"]): {c: cell.value for c, cell in r.cells.items()} for r in rows if r.cells}


TOPIC_CE = "helpdesk.ticket-events"


class TicketPriorityEvents(KeyedAgent):
    """CloudEvents (binary mode in the worker test: attributes in ``ce_*`` headers) setting a
    ticket's priority."""

    name: ClassVar[str] = "ticket-priority"
    topic: ClassVar[str] = TOPIC_CE
    event_types: ClassVar[tuple[str, ...]] = ("ticket.prioritized",)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)
    decoder = CloudEventsDecoder()

    def handle(self, event: Event) -> Iterable[Upsert]:
        ref = TicketRef.parse(event.ordering_key)
        return [Upsert(TICKET.name, ref.key, {**ref.cells, "priority": event.payload["data"]["priority"]},
                       event.version)]  # fmt: skip


#: The worker test's app: the CDC topic and a CloudEvents topic.
worker_app = App("support-desk-decoded", agents=[TicketCdcAgent(), TicketPriorityEvents()],
                 projections=[TicketProjection()])  # fmt: skip
