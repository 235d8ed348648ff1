"""Hub rows whose tenant is a cell, random histories of them, and the model retention is checked against.

The app (``tests.retention.hubs:app``): ``hub.record`` writes a hub row's
tenant (``org_id``) and title, ``hub.insight`` an insight cell of the same
row (another pipeline: no tenant), ``hub.note`` a row of ``hub_note``, which
takes its tenant from the hub row (``tenant_from``). Tenant o1 keeps 10
days, o2 forever, every other tenant (a hub without a record: ``-``) 30.

A history (``hub_history``) owns its hubs (``h`` in every key). Its events
have versions on a six-hour grid around the cutoffs of two runs (``RUN1``,
``RUN2`` three days later), a microsecond either side. It is delivered in
three parts: before run 1 (each hub's first delivered record among them:
a row is retained under the tenant the store knows when the run runs),
between the runs (the rest, shuffled, duplicated) and after run 2 (replays).

The model, written here apart from the code: per cell, the latest write;
kept when its version is at or after ``RUN2`` minus its tenant's days (a
hub's tenant: the org of its records, else ``-``; a note's: its hub's).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.retention import DAY_US, RetentionPolicy

HUB = TableSchema("hub", (Column("hub_id", "text"),),
                  (Column("org_id", "text"), Column("title", "text"), Column("insight", "text")))  # fmt: skip
NOTE = TableSchema("hub_note", (Column("hub_id", "text"),), (Column("note", "text"),))
POLICY = RetentionPolicy(default_days=30, per_tenant={"o1": {"*": 10}, "o2": {"*": None}},
                         tenant_from={"hub_note": "hub"})  # fmt: skip
#: Days each tenant keeps, as the model reads them (None: forever).
DAYS = {"o1": 10, "o2": None, "-": 30}
RUN1 = 100 * DAY_US
RUN2 = RUN1 + 3 * DAY_US
STEP = DAY_US // 4

Cells = dict[str, tuple[Any, int]]


class HubAgent(KeyedAgent):
    """Records, insights and notes of hubs (see the module docstring)."""

    name: ClassVar[str] = "hub"
    topic: ClassVar[str] = "hub"
    event_types: ClassVar[tuple[str, ...]] = ("hub.record", "hub.insight", "hub.note")
    tables: ClassVar[tuple[TableSchema, ...]] = (HUB, NOTE)

    def handle(self, event: Event) -> Iterable[Upsert]:
        key, p = {"hub_id": event.ordering_key}, event.payload
        if event.type == "hub.record":
            return [Upsert("hub", key, {"org_id": p["org"], "title": p["text"]}, event.version)]
        if event.type == "hub.insight":
            return [Upsert("hub", key, {"insight": p["text"]}, event.version)]
        return [Upsert("hub_note", key, {"note": p["text"]}, event.version)]


app = App("hubs", agents=[HubAgent()], retention=POLICY)


def hub_event(kind: str, hub: str, version: int, org: str | None = None) -> Event:
    """An event of ``kind`` (record, insight, note) about ``hub`` at ``version``."""
    payload: dict[str, Any] = {"text": f"{kind[0]}{version}"}
    if org is not None:
        payload["org"] = org
    return Event(f"{kind}-{hub}-{version}", hub, version, version, f"hub.{kind}", payload)


@dataclass(frozen=True)
class HubHistory:
    """One history: its hubs' tenants and its three delivery parts."""

    h: int
    tenants: dict[str, str]
    events: tuple[Event, ...]
    parts: tuple[tuple[Event, ...], tuple[Event, ...], tuple[Event, ...]]


def hub_history(rng: random.Random, h: int, *, hubs: int = 2, size: int = 8) -> HubHistory:
    """History ``h``: ``hubs`` hubs of random tenants, 1..``size`` events each (module docstring)."""
    tenants: dict[str, str] = {}
    events: list[Event] = []
    for i in range(hubs):
        hub = f"h{h}-{i}"
        org = rng.choice(["o1", "o2", None])
        for _ in range(rng.randint(1, size)):
            kind = rng.choice(["record", "insight", "insight", "note"] if org else ["insight", "note"])
            version = RUN2 - rng.randint(0, 36 * 4) * STEP + rng.choice([0, 0, -1, 1])
            events.append(hub_event(kind, hub, version, org if kind == "record" else None))
        recorded = any(e.type == "hub.record" and e.ordering_key == hub for e in events)
        tenants[hub] = org if org and recorded else "-"
    events = list({e.event_id: e for e in events}.values())
    sent = events + [rng.choice(events) for _ in range(rng.randint(0, len(events)))]
    rng.shuffle(sent)
    cut = rng.randint(0, len(sent))
    first, rest = sent[:cut], sent[cut:]
    for hub in tenants:  # each hub's tenant is known to the first run (the README's limit)
        if not any(e.type == "hub.record" and e.ordering_key == hub for e in first):
            record = next((e for e in rest if e.type == "hub.record" and e.ordering_key == hub), None)
            if record is not None:
                first.append(record)
    replays = [rng.choice(events) for _ in range(rng.randint(0, len(events)))]
    return HubHistory(h, tenants, tuple(events), (tuple(first), tuple(rest), tuple(replays)))


def hub_model(hist: HubHistory) -> dict[str, dict[tuple[str, ...], Cells]]:
    """``{table: {key values: {column: (value, version)}}}`` the store holds after run 2."""
    cells: dict[str, dict[tuple[str, ...], Cells]] = {"hub": {}, "hub_note": {}}
    for e in sorted(hist.events, key=lambda e: e.version):
        table = "hub_note" if e.type == "hub.note" else "hub"
        row = cells[table].setdefault((e.ordering_key,), {})
        if e.type == "hub.record":
            row.update(org_id=(e.payload["org"], e.version), title=(e.payload["text"], e.version))
        else:
            row["note" if table == "hub_note" else "insight"] = (e.payload["text"], e.version)
    out: dict[str, dict[tuple[str, ...], Cells]] = {}
    for table, rows in cells.items():
        out[table] = {}
        for key, row in rows.items():
            days = DAYS[hist.tenants[key[0]]]
            kept = {c: cv for c, cv in row.items() if days is None or cv[1] >= RUN2 - days * DAY_US}
            if kept:
                out[table][key] = kept
    return out
