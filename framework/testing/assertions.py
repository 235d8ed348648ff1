"""Convergence assertions: any delivery of a history ends in the state of one in-order pass.

``assert_converges`` runs the history in order through a fresh ``Driver``,
then a delivery order (given, or drawn by Hypothesis) through another one,
and compares their ``Snapshot``: every table's rows (cells with values,
write times and expiries), every projection's documents (document and
version) and the parked messages (as a set of (message, stage, error):
a duplicate of a bad message parks again, which is not a divergence).

A check never passes vacuously: it fails when a message was parked at
``route`` (no agent or lookup topic takes it), when an event still waits for
a lookup entry at the end, or when the in-order pass wrote no row at all,
unless the test allows it (``allow_unrouted``, ``allow_pending``,
``allow_empty``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.aggregates.tables import tables_of
from framework.core.events import Event
from framework.core.extras import needs_extra
from framework.core.rows import Row
from framework.testing.driver import Driver, Message, Parked
from framework.testing.strategies import deliveries as delivery_orders

with needs_extra("framework.testing's Hypothesis support"):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

if TYPE_CHECKING:
    from framework.app import App

__all__ = [
    "Snapshot",
    "snapshot",
    "run_history",
    "differences",
    "vacuity",
    "assert_converges",
    "check_convergence",
]

#: Parked messages as compared: (message, stage, error class, error text).
ParkedKey = tuple[str, str, str, str]
#: An event waiting for a lookup entry: (agent, event id, lookup, key).
PendingKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Snapshot:
    """Everything a run stored: ``tables[table][key values] -> Row``, ``documents[projection name]
    [doc_id] -> (document, version)``, the set of parked messages and the events still waiting
    for a lookup entry (``Driver.pending``)."""

    tables: dict[str, dict[tuple[Any, ...], Row]]
    documents: dict[str, dict[str, tuple[dict[str, Any], int]]]
    parked: frozenset[ParkedKey]
    pending: frozenset[PendingKey] = frozenset()
    #: per aggregate, ``contrib:<entity>`` and ``total`` -> {group id: measures}: an aggregate's
    #: tables are compared by these values (their write times, marks and ``reflects`` depend on
    #: the order the entities changed in, by design: totals are written at group-topic offsets;
    #: a window's ``revisions`` on when the changes were processed)
    aggregates: dict[str, dict[str, dict[str, dict[str, float]]]] = dataclasses.field(default_factory=dict)

    @property
    def rows(self) -> int:
        """How many live rows every table holds together."""
        return sum(len(rows) for rows in self.tables.values())


def _parked_key(p: Parked) -> ParkedKey:
    what = p.event.event_id if isinstance(p.event, Event) else repr(p.event[:80])
    return (what, p.stage, type(p.error).__name__, str(p.error))


def snapshot(driver: Driver) -> Snapshot:
    """The state ``driver`` holds now: every table of its app, every projection, the parked set."""
    app = driver.app
    derived = {t.name for a in app.aggregates for t in tables_of(a).all}
    tables = {t.name: {tuple(r.key.values()): r for r in driver.rows(t.name)}
              for t in app.tables if t.name not in derived}  # fmt: skip
    documents = {p.name: driver.documents(p) for p in app.projections}
    pending = frozenset((agent, *item) for agent, items in driver.pending().items() for item in items)
    aggregates = {
        a.name: {
            **{f"contrib:{entity}": groups for entity, groups in driver.contributions(a).items()},
            "total": driver.totals(a),
        }
        for a in app.aggregates
    }
    return Snapshot(tables, documents, frozenset(_parked_key(p) for p in driver.parked), pending, aggregates)


def vacuity(
    snap: Snapshot, *, allow_unrouted: bool = False, allow_pending: bool = False, allow_empty: bool = False
) -> list[str]:
    """Why a check on ``snap`` would have exercised less than it claims, one line each: messages
    parked at ``route``, events still waiting for a lookup entry, no row at all (each unless
    allowed)."""
    out: list[str] = []
    if not allow_unrouted:
        out += [f"parked at route: {what}: {error}" for what, stage, _, error in sorted(snap.parked)
                if stage == "route"]  # fmt: skip
    if not allow_pending:
        out += [f"{agent} {eid} still waits for lookup {lookup}[{key!r}]"
                for agent, eid, lookup, key in sorted(snap.pending)]  # fmt: skip
    if not allow_empty and snap.rows == 0:
        out.append("no table holds a row")
    return out


def _exercised(app: App, snap: Snapshot, run: str, show: int, **allowed: bool) -> None:
    found = vacuity(snap, **allowed)
    if found:
        lines = found[:show] + ([f"... and {len(found) - show} more"] if len(found) > show else [])
        raise AssertionError(
            f"{app.name}: the {run} exercised less than the check claims (allow_unrouted, allow_pending "
            f"or allow_empty when the test expects it):\n  " + "\n  ".join(lines)
        )


def run_history(app: App, messages: Sequence[Message]) -> Snapshot:
    """The snapshot of a fresh driver after ``messages``, in the order given."""
    with Driver(app) as driver:
        driver.send(messages)
        return snapshot(driver)


def _cells(row: Row | None, writetimes: bool = True) -> dict[str, tuple[Any, ...]]:
    if row is None:
        return {}
    if not writetimes:
        return {name: (c.value,) for name, c in row.cells.items()}
    return {name: (c.value, c.writetime) + (() if c.expires_at is None else (c.expires_at,))
            for name, c in row.cells.items()}  # fmt: skip


def joined_tables(app: App) -> frozenset[str]:
    """The tables agents with lookups write: their cells' write times count the stream's
    re-mappings (``framework.state.version_rule``), so the kit compares them by value."""
    return frozenset(t.name for a in app.agents if getattr(a, "lookups", ()) for t in a.tables)


def differences(expected: Snapshot, actual: Snapshot, values_only: frozenset[str] = frozenset()) -> list[str]:
    """Every difference, one line each: ``where: expected -> actual`` (tables, documents, parked);
    the cells of the tables ``values_only`` names are compared without their write times."""
    out: list[str] = []
    for table in sorted(set(expected.tables) | set(actual.tables)):
        exp, act = expected.tables.get(table, {}), actual.tables.get(table, {})
        times = table not in values_only
        for key in sorted(set(exp) | set(act), key=repr):
            e, a = _cells(exp.get(key), times), _cells(act.get(key), times)
            if not e or not a:
                out.append(f"table {table} row {key!r}: {e or 'no row'} -> {a or 'no row'}")
                continue
            for name in sorted(set(e) | set(a)):
                if e.get(name) != a.get(name):
                    out.append(f"table {table} row {key!r} cell {name}: {e.get(name)} -> {a.get(name)}")
    for name in sorted(set(expected.documents) | set(actual.documents)):
        exp_docs, act_docs = expected.documents.get(name, {}), actual.documents.get(name, {})
        for doc_id in sorted(set(exp_docs) | set(act_docs)):
            ed, ad = exp_docs.get(doc_id), act_docs.get(doc_id)
            if ed is None or ad is None:
                out.append(
                    f"projection {name} doc {doc_id!r}: {ed or 'no document'} -> {ad or 'no document'}"
                )
                continue
            for field in sorted(set(ed[0]) | set(ad[0])):
                if ed[0].get(field, "<absent>") != ad[0].get(field, "<absent>"):
                    out.append(
                        f"projection {name} doc {doc_id!r} field {field}: "
                        f"{ed[0].get(field, '<absent>')!r} -> {ad[0].get(field, '<absent>')!r}"
                    )
            if ed[1] != ad[1]:
                out.append(f"projection {name} doc {doc_id!r} version: {ed[1]} -> {ad[1]}")
    for name in sorted(set(expected.aggregates) | set(actual.aggregates)):
        exp_agg, act_agg = expected.aggregates.get(name, {}), actual.aggregates.get(name, {})
        for part in sorted(set(exp_agg) | set(act_agg)):
            eg, ag = exp_agg.get(part, {}), act_agg.get(part, {})
            for gid in sorted(set(eg) | set(ag)):
                if eg.get(gid) != ag.get(gid):
                    out.append(f"aggregate {name} {part} group {gid}: {eg.get(gid)} -> {ag.get(gid)}")
    for p in sorted(expected.parked - actual.parked):
        out.append(f"parked only in order: {p}")
    for p in sorted(actual.parked - expected.parked):
        out.append(f"parked only when delivered: {p}")
    return out


def _describe(order: Sequence[Message]) -> str:
    ids = [m.event_id if isinstance(m, Event) else repr(m[:40]) for m in order]
    return f"delivery of {len(ids)} messages: {', '.join(ids[:30])}{', ...' if len(ids) > 30 else ''}"


def _check(app: App, expected: Snapshot, order: Sequence[Message], show: int, **allowed: bool) -> Snapshot:
    actual = run_history(app, order)
    _exercised(app, actual, "delivery", show, **{**allowed, "allow_empty": True})
    found = differences(expected, actual, joined_tables(app))
    if found:
        lines = found[:show] + ([f"... and {len(found) - show} more"] if len(found) > show else [])
        raise AssertionError(
            f"{app.name}: the delivery does not converge to the in-order pass "
            f"({len(found)} differences, in order -> delivered):\n  "
            + "\n  ".join(lines)
            + f"\n{_describe(order)}"
        )
    return actual


def assert_converges(
    app: App,
    history: Sequence[Message],
    deliveries: Sequence[Message] | None = None,
    *,
    max_examples: int = 50,
    show: int = 15,
    allow_unrouted: bool = False,
    allow_pending: bool = False,
    allow_empty: bool = False,
    **delivery_options: Any,
) -> Snapshot:
    """Assert that delivering ``history`` (in order) as ``deliveries`` stores what the in-order
    pass stores; AssertionError lists the first ``show`` differences.

    Without ``deliveries``, Hypothesis draws ``max_examples`` delivery orders
    (``framework.testing.deliveries(history, **delivery_options)``) and reports
    the smallest failing one; inside a ``@given`` test, draw the order there
    and pass it. Returns the snapshot of the (last) delivery.

    Cells of the tables that agents with lookups write are compared by value: their write
    times count the stream's re-mappings (``joined_tables``).

    Also AssertionError when a run parked a message at ``route``, when an event still waits
    for a lookup entry, or when the in-order pass wrote no row, unless ``allow_unrouted``,
    ``allow_pending`` or ``allow_empty`` says the test expects it.
    """
    allowed = {"allow_unrouted": allow_unrouted, "allow_pending": allow_pending}
    expected = run_history(app, history)
    _exercised(app, expected, "in-order pass", show, **allowed, allow_empty=allow_empty)
    if deliveries is not None:
        return _check(app, expected, deliveries, show, **allowed)
    seen: list[Snapshot] = []

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def each_delivery(data: st.DataObject) -> None:
        order = data.draw(delivery_orders(history, **delivery_options), label="delivery")
        seen.append(_check(app, expected, order, show, **allowed))

    each_delivery()
    return seen[-1]


def check_convergence(
    app: App,
    histories: st.SearchStrategy[Sequence[Message]],
    *,
    max_examples: int = 100,
    allow_unrouted: bool = False,
    allow_pending: bool = False,
    allow_empty: bool = False,
    **delivery_options: Any,
) -> None:
    """Run a Hypothesis property with ``max_examples`` examples: for a history drawn from
    ``histories`` (each in order) and a delivery drawn by ``deliveries(history,
    **delivery_options)``, ``assert_converges`` holds (``allow_unrouted`` and ``allow_pending``
    passed on). A history may write no row, but AssertionError when no example wrote one,
    unless ``allow_empty``."""
    allowed = {"allow_unrouted": allow_unrouted, "allow_pending": allow_pending}
    most = [0]

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def converges(data: st.DataObject) -> None:
        history = list(data.draw(histories, label="history"))
        order = data.draw(delivery_orders(history, **delivery_options), label="delivery")
        most[0] = max(most[0], assert_converges(app, history, order, allow_empty=True, **allowed).rows)

    converges()
    if not allow_empty and most[0] == 0:
        raise AssertionError(
            f"{app.name}: no history of the {max_examples} examples wrote a row (allow_empty when expected)"
        )
