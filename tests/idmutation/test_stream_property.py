"""Stream and batch sides of ID mutation together converge to an independent oracle.

Random histories of owner rows (activity cells, status log entries) of two tenants interleave
with chains, merges and deletes of owner ids, and late events (a version after the mutation of
the id they carry). Events and requests arrive in a random order with duplicates, through the
test driver (the worker's processing code, SQLite in memory). At random points the ID map of
the requests delivered so far is fed to the driver (the stream resolves later events through
it) or applied to the store by the batch side (``apply_id_map`` with the documents of the
partitions it touched re-projected: ``Driver.id_job``); once more at the end, then events that
arrive only after that. The rows then equal the oracle's: every event's cells under the final
id of its owner, found by following the requests (no ``framework.idmutation`` code), per-cell
last write wins, a deleted owner's cells absent; and so do the documents (one per owner with
rows, at the highest version of its events; none for emptied old ids).

The generated requests stay within the rule's documented scope for the batch side: an id is
moved at most once and is never a new id after its move (no re-used ids, so every id has one
final id for all versions: README "ID mutation").
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.events import Event
from framework.idmutation import IdRequest, collapse, map_topic_of
from framework.idmutation.resolution import mapped_event
from framework.testing import Driver
from tests.idmutation.stream_app import activity, app, owner_doc, projected, status

TENANTS = ("t1", "t2")
IDS = tuple("abcdefg")
ACTS = ("x1", "x2", "x3")
MAP = map_topic_of(app.name)


@dataclass(frozen=True)
class Case:
    requests: list[IdRequest]
    events: list[Event]
    #: arrival order: ("event", i) | ("request", i) | ("map",) | ("apply",)
    arrival: list[tuple]
    #: events that arrive only after the last apply and the last map (the stream alone places them)
    tail: list[int] = dataclasses.field(default_factory=list)


def make_case(rnd: random.Random, max_requests: int = 6, max_events: int = 25, max_points: int = 4) -> Case:
    """A random case (see the module docstring) from ``rnd``."""
    requests: list[IdRequest] = []
    for tenant in TENANTS:
        moved: set[str] = set()
        times = sorted(rnd.sample(range(10, 300), rnd.randint(0, max_requests)))
        for t in times:  # executed in time order; an id moves once, a moved id is never a target
            live = [i for i in IDS if i not in moved]
            if len(live) < 2:
                break
            old = rnd.choice(live)
            kind = rnd.choices(("convert", "merge", "delete"), (5, 3, 2))[0]
            new = None if kind == "delete" else rnd.choice([i for i in live if i != old])
            requests.append(IdRequest(t, f"r{len(requests)}", tenant, kind, old, new))  # type: ignore[arg-type]
            moved.add(old)
    n = rnd.randint(1, max_events)
    versions = rnd.sample(range(1, 400), n)  # distinct: no ties between different events
    events: list[Event] = []
    for k, v in enumerate(versions):
        tenant, owner = rnd.choice(TENANTS), rnd.choice(IDS)
        if rnd.random() < 0.25:
            events.append(status(f"e{k}", tenant, owner, rnd.choice(("new", "won", "lost")), v))
        else:
            cells = {c: f"{c}{k}" for c in ("body", "kind") if rnd.random() < 0.7} or {"body": f"b{k}"}
            events.append(activity(f"e{k}", tenant, owner, rnd.choice(ACTS), v, **cells))
    tail = [i for i in range(len(events)) if rnd.random() < 0.25]
    items: list[tuple] = [("event", i) for i in range(len(events)) if i not in tail]
    items += [("request", i) for i in range(len(requests))]
    items += [("event", i) for i in range(len(events)) if i not in tail and rnd.random() < 0.2]  # duplicates
    items += [("request", i) for i in range(len(requests)) if rnd.random() < 0.2]
    items += [(rnd.choice(("map", "apply")),) for _ in range(rnd.randint(0, max_points))]
    rnd.shuffle(items)
    return Case(requests, events, items, tail + [i for i in tail if rnd.random() < 0.3])


cases = st.builds(make_case, st.randoms(use_true_random=False))


def final_owner(requests: list[IdRequest], tenant: str, ident: str) -> str | None:
    """The oracle: follow the (single) move of each id until an id that never moved."""
    moves = {r.old_id: r.new_id for r in requests if r.tenant == tenant}
    while ident in moves:
        ident = moves[ident]  # type: ignore[assignment]
        if ident is None:
            return None
    return ident


def oracle(case: Case) -> tuple[dict, dict]:
    acts: dict[tuple, dict[str, tuple[str, int]]] = {}
    logs: dict[tuple, dict[str, tuple[str, int]]] = {}
    for e in case.events:
        p = e.payload
        final = final_owner(case.requests, p["tenant"], p["owner"])
        if final is None:
            continue
        if e.type == "owner.status":
            logs[(p["tenant"], final, e.occurred_at, e.event_id)] = {
                "state": (p["status"], e.version), "by": (p["by"], e.version)}  # fmt: skip
            continue
        row = acts.setdefault((p["tenant"], final, p["activity"]), {})
        for c in ("body", "kind"):
            if c in p and (c not in row or row[c][1] < e.version):
                row[c] = (p[c], e.version)
    return acts, logs


def stored(d: Driver, table: str, key: tuple[str, ...]) -> dict[tuple, dict[str, tuple[object, int]]]:
    return {tuple(r.key[k] for k in key): {n: (c.value, c.writetime) for n, c in r.cells.items()}
            for r in d.rows(table)}  # fmt: skip


def documents(case: Case, acts: dict, logs: dict) -> dict[str, tuple[dict, int]]:
    """The oracle's documents: one per owner with rows, at the highest version of its events."""
    versions: dict[tuple[str, str], int] = {}
    for e in case.events:
        final = final_owner(case.requests, e.payload["tenant"], e.payload["owner"])
        if final is not None:
            owner = (e.payload["tenant"], final)
            versions[owner] = max(versions.get(owner, 0), e.version)
    out = {}
    for tenant, owner in {k[:2] for k in acts} | {k[:2] for k in logs}:
        rows = {
            k[2]: {c: v for c, (v, _) in cells.items()}
            for k, cells in acts.items()
            if k[:2] == (tenant, owner)
        }
        states = [f"{cells['state'][0]}@{k[2]}" for k, cells in logs.items() if k[:2] == (tenant, owner)]
        out[f"{tenant}:{owner}"] = (owner_doc(tenant, owner, rows, states), versions[(tenant, owner)])
    return out


def run_case(case: Case) -> Driver:
    """Deliver the case; the job's runs through ``Driver.id_job`` (moves and re-projection, or the
    map alone); then the whole map applied and published, then the tail."""
    d = Driver(projected)
    delivered: list[IdRequest] = []
    for item in case.arrival:
        if item[0] == "event":
            assert d.send(case.events[item[1]]) == []
        elif item[0] == "request":
            delivered.append(case.requests[item[1]])
        else:
            d.id_job(delivered, apply=item[0] == "apply", publish=item[0] == "map")
    d.id_job(case.requests)
    for i in case.tail:  # late: after the job applied the whole map, with no apply after them
        assert d.send(case.events[i]) == []
    return d


@settings(max_examples=300, deadline=None)
@given(cases)
def test_stream_and_batch_converge_to_the_oracle(case: Case) -> None:
    acts, logs = oracle(case)
    with run_case(case) as d:
        assert stored(d, "owner_activity", ("tenant", "owner_id", "activity_id")) == acts
        assert stored(d, "owner_log", ("tenant", "owner_id", "at", "event_id")) == logs
        assert d.documents("owner_docs") == documents(case, acts, logs)


def test_a_late_event_after_the_map_never_needs_the_job() -> None:
    """Events that arrive after the map reached the stream are stored under their final id at once."""
    requests = [IdRequest(10, "r1", "t1", "convert", "a", "b"), IdRequest(20, "r2", "t1", "merge", "b", "c"),
                IdRequest(30, "r3", "t1", "delete", "d")]  # fmt: skip
    events = [activity("e1", "t1", "a", "x1", 50, body="late"), status("e2", "t1", "d", "won", 60)]
    case = Case(requests, events, [("request", 0), ("request", 1), ("request", 2), ("map",), ("event", 0),
                                   ("event", 1)])  # fmt: skip
    d = Driver(app)
    try:
        delivered: list[IdRequest] = []
        for item in case.arrival:
            if item[0] == "request":
                delivered.append(requests[item[1]])
            elif item[0] == "map":
                for (tenant, ident), intervals in collapse(delivered).items():
                    d.send(mapped_event(tenant, ident, intervals, 1), topic=MAP)
            else:
                d.send(events[item[1]])
        assert stored(d, "owner_activity", ("tenant", "owner_id", "activity_id")) == oracle(case)[0]
        assert d.rows("owner_log") == []
    finally:
        d.close()


def test_the_generator_makes_late_events_merges_and_deletes() -> None:
    """The cases cover what the property is about (counted on fixed seeds)."""
    late = merges = deletes = chains = 0
    for seed in range(60):
        case = make_case(random.Random(seed))
        times = {(r.tenant, r.old_id): r.executed_at for r in case.requests}
        targets = {(r.tenant, r.new_id) for r in case.requests}
        late += sum(1 for e in case.events
                    if e.version > times.get((e.payload["tenant"], e.payload["owner"]), 10**9))  # fmt: skip
        merges += sum(r.op == "merge" for r in case.requests)
        deletes += sum(r.op == "delete" for r in case.requests)
        chains += sum((r.tenant, r.old_id) in targets for r in case.requests)
    assert late > 20 and merges > 5 and deletes > 5 and chains > 5
