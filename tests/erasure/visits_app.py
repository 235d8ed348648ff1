"""A small app whose aggregates group by personal data, for the erasure of groups (test kit).

``visit.set`` writes one ``visit`` row (its ``owner`` an e-mail address in any spelling, its
``site``, its ``minutes`` and event time ``at`` in microseconds). ``visits_daily`` counts visits
and sums minutes per owner (as spelled: a personal group part, kind ``email``) and UTC day,
final a day after the day ends, from 2 buckets; ``by_site`` counts visits per site (nothing
personal in its groups). The owner's cell is personal data (the row goes on erasure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import (
    Aggregate,
    App,
    Column,
    Contribution,
    Event,
    KeyedAgent,
    PersonalData,
    Row,
    TableSchema,
    Upsert,
    Window,
)

DAY_S = 86_400
VISIT = TableSchema(
    "visit",
    partition_key=(Column("visit_id", "text"),),
    columns=(
        Column("owner", "text"),
        Column("site", "text"),
        Column("minutes", "bigint"),
        Column("at", "bigint"),
    ),
)


class VisitAgent(KeyedAgent):
    name: ClassVar[str] = "visits"
    topic: ClassVar[str] = "visits"
    event_types: ClassVar[tuple[str, ...]] = ("visit.set",)
    tables: ClassVar[tuple[TableSchema, ...]] = (VISIT,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        p = event.payload
        cells = {"owner": p["owner"], "site": p["site"], "minutes": p["minutes"], "at": p["at"]}
        return [Upsert("visit", {"visit_id": p["visit_id"]}, cells, event.version)]


def _visit(rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
    live = [r.values() for r in rows["visit"] if r.cells]
    return live[0] if live and live[0].get("owner") is not None else None


class VisitsDaily(Aggregate):
    name: ClassVar[str] = "visits_daily"
    tables: ClassVar[tuple[TableSchema, ...]] = (VISIT,)
    group_by: ClassVar[tuple[str, ...]] = ("owner",)
    measures = {"visits": "count", "minutes": "sum"}
    window: ClassVar[Window | None] = Window(DAY_S)
    final_after_s: ClassVar[float | None] = DAY_S
    buckets: ClassVar[int] = 2
    personal: ClassVar[Mapping[str, str]] = {"owner": "email"}

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        v = _visit(rows)
        if v is None:
            return []
        return [Contribution({"owner": v["owner"]}, {"minutes": v["minutes"]}, at=int(v["at"]) // 1_000_000)]


class BySite(Aggregate):
    name: ClassVar[str] = "by_site"
    tables: ClassVar[tuple[TableSchema, ...]] = (VISIT,)
    group_by: ClassVar[tuple[str, ...]] = ("site",)
    measures = {"visits": "count"}

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        v = _visit(rows)
        return [] if v is None else [Contribution({"site": v["site"]})]


app = App(
    "visits",
    agents=[VisitAgent()],
    aggregates=[VisitsDaily(), BySite()],
    personal_data=[PersonalData("email", "visit", columns=("owner",), normalize=str.lower)],
)
