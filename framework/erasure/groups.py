"""Erasure in aggregates: the groups whose key holds a subject, and the entities keyed by one.

An aggregate names the group parts that are personal data (``Aggregate.personal``: group-key
name -> subject kind). A group is the subject's when one of those parts, normalised as the
kind's ``PersonalData`` declarations normalise, equals the subject's value normalised. Such a
group holds personal data in its key, so it goes whole, in every window, rather than being
recomputed without the subject: ``find_groups`` gives, at ``MAX_VERSION`` (the top of the
reconcile order: no replay, backfill or late total can outrank them), a partition delete of
its ``_totals`` series (every window, also one final and revised), of each ``_buckets`` and
``_members`` partition found, and a row delete of every ``_contrib`` row of it. They are found
by a scan of the aggregate's ``_members`` and ``_totals`` (and ``_buckets`` with buckets), only
for the aggregates that declare the subject's kind.

An entity whose partition key holds the subject (a ``key_column`` declaration: its source
rows were all erased) has its ``_contrib`` partition deleted and its ``_members`` rows with
it; the other groups it was in (not the subject's) are returned in ``announce``, so their
totals are recomputed without it.

``group_screen`` keeps them out afterwards: the contributions writer (``ContributionIndex``)
asks it for every group it would write and drops the erased subjects' groups, whatever the
entity's rows say (a store that purged the tombstones, a subject seen in a new event).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.aggregates.contributions import Changed, GroupScreen
from framework.aggregates.tables import tables_of
from framework.core.aggregate import Aggregate, Group, parse_series
from framework.core.mutations import MAX_VERSION, Delete
from framework.erasure.declare import Subject
from framework.erasure.keyed import subject_hash

__all__ = ["GroupErasure", "find_groups", "group_screen", "withheld_groups"]


@dataclass
class GroupErasure:
    """The deletes of a subject's groups and keyed entities; the other groups those entities left."""

    deletes: dict[tuple[str, str], Delete] = field(default_factory=dict)
    announce: dict[str, dict[Changed, None]] = field(default_factory=dict)
    scanned: int = 0

    def add(self, table: str, key: Mapping[str, Any]) -> None:
        ident = (table, json.dumps(dict(key), sort_keys=True, default=str))
        self.deletes.setdefault(ident, Delete(table, dict(key), MAX_VERSION))


def _norms(app: Any) -> dict[str, Callable[[str], str]]:
    return {d.kind: d.norm for d in getattr(app, "personal_data", ())}


def _matcher(agg: Aggregate, kind: str, value: str, norm: Callable[[str], str]) -> Callable[[str], bool]:
    """True for a series id (stored text) whose parts of ``kind`` hold ``value`` (normalised)."""
    seen: dict[str, bool] = {}

    def matches(series: str) -> bool:
        if series not in seen:
            parts = agg.personal_values(parse_series(series))
            seen[series] = any(k == kind and norm(v) == value for k, v in parts)
        return seen[series]

    return matches


async def find_groups(
    store: Any, app: Any, subject: Subject, keyed: Mapping[str, Sequence[str]] = {}
) -> GroupErasure:
    """The deletes of ``subject``'s groups in every aggregate of ``app`` and of the contributions
    of the entities ``keyed`` names (by aggregate name: document ids whose key holds the subject)."""
    out = GroupErasure()
    norm = _norms(app).get(subject.kind, lambda v: v)
    value = norm(subject.value)
    for agg in getattr(app, "aggregates", ()):
        t = tables_of(agg)
        if subject.kind in agg.personal.values():
            matches = _matcher(agg, subject.kind, value, norm)
            async for row in store.scan(t.totals.name):
                out.scanned += 1
                if matches(str(row.key["series"])):
                    out.add(t.totals.name, {"series": row.key["series"]})
            if agg.buckets > 1:
                async for row in store.scan(t.buckets.name):
                    out.scanned += 1
                    if matches(str(row.key["series"])):
                        out.add(t.buckets.name, {"series": row.key["series"], "window": row.key["window"]})
            async for row in store.scan(t.members.name):
                out.scanned += 1
                series, window = row.key["series"], row.key["window"]
                if matches(str(series)):
                    out.add(t.members.name, {"series": series, "window": window, "bucket": row.key["bucket"]})
                    out.add(t.contrib.name, {"entity": row.key["entity"], "series": series, "window": window})
        else:
            matches = _never
        for entity in keyed.get(agg.name, ()):
            bucket = agg.bucket_of(entity)
            for row in await store.read_partition(t.contrib.name, {"entity": entity}):
                out.scanned += 1
                series, window = row.key["series"], row.key["window"]
                out.add(
                    t.members.name, {"series": series, "window": window, "bucket": bucket, "entity": entity}
                )
                if not matches(str(series)):
                    g = Group(tuple(parse_series(str(series))), int(str(window)))
                    out.announce.setdefault(agg.name, {})[(g, bucket)] = None
            out.add(t.contrib.name, {"entity": entity})
    return out


def _never(series: str) -> bool:
    return False


def withheld_groups(app: Any, screen: Any) -> GroupScreen | None:
    """The test of groups holding a subject on ``screen`` (a ``SubjectScreen``: its key and keyed
    hashes) in a personal part; None when no aggregate of ``app`` declares one or nobody is erased."""
    aggs = [a for a in getattr(app, "aggregates", ()) if a.personal]
    if screen is None or not aggs or not screen.hashes:
        return None
    norms = _norms(app)
    key, hashes = screen.key, screen.hashes
    seen: dict[tuple[str, str], bool] = {}

    def erased(agg: Aggregate, group: Group) -> bool:
        for kind, v in agg.personal_values(group.series):
            if (kind, v) not in seen:
                norm = norms.get(kind)
                seen[(kind, v)] = norm is not None and subject_hash(key, kind, norm(v)) in hashes
            if seen[(kind, v)]:
                return True
        return False

    return erased


def group_screen(app: Any, holder: Any) -> Callable[[], GroupScreen | None] | None:
    """For ``ContributionIndex(screen=...)``: the group test of ``holder``'s current screen (a
    ``ScreenHolder``, reloaded by the worker), rebuilt when the screen is; None when no aggregate of
    ``app`` declares a personal group part or ``holder`` is None."""
    if holder is None or not any(a.personal for a in getattr(app, "aggregates", ())):
        return None
    built: list[Any] = [None, None]

    def current() -> GroupScreen | None:
        screen = holder.current
        if screen is None:
            return None
        if built[0] is not screen or built[1] is None:
            built[0], built[1] = screen, withheld_groups(app, screen)
        return built[1]

    return current
