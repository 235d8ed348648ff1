"""Random ID-mutation histories where requests are learnt late, and their model (issue 22, case 5).

A history is, per tenant, requests in execution order (an id may be converted, merged or deleted
several times: a delete then a merge, two converts of one id; the new id of a request has not
been moved before it), owner activity rows and status entries of the tenant's ids, delivered in
a shuffled order with duplicates, among points where the job's map is published to the stream
(``map``), applied to the store (``apply``) or both (``job``), with the requests delivered so
far. Then the whole map is applied and published, and held-back events and replays arrive.

The model (``final_owner``) knows nothing of ``framework.idmutation``: it follows the requests in
execution order from the write's id at its version: the first request executed at or after the
version that moves the current id; an id already moved away at that version (the upstream had not
caught up: a late event) goes where its last move sent it. Every write lands under its final
owner, or is absent when that owner is deleted; per cell the highest version wins.

Every write of one activity row carries the same owner id and versions between the same two
request times of its tenant, and activity ids are unique per owner: writes that share a cell
always have the same final id under any set of requests (README "ID mutation": one cell of one id
holds one value). ``flips`` names the histories that the documented limit excludes: a write whose
final, over the map's successive applies, comes back to an id it was moved away from.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from framework.core.events import Event
from framework.idmutation import IdRequest
from tests.idmutation.stream_app import activity, status

IDS = tuple("abcde")


@dataclass(frozen=True)
class History:
    requests: list[IdRequest]
    events: list[Event]
    #: arrival: ("event", i) | ("request", i) | ("map",) | ("apply",) | ("job",)
    arrival: list[tuple]
    #: events that arrive after the last job (held back, or replayed)
    tail: list[int] = field(default_factory=list)


def make_history(rnd: random.Random, tenants: Sequence[str] = ("t1", "t2"), max_requests: int = 7,
                 max_rows: int = 6, max_points: int = 4, flip_share: float = 0.0) -> History:  # fmt: skip
    """A random history (see the module docstring) of ``tenants``; with ``flip_share`` of them, a
    tenant ``<first tenant>-flip`` whose one write the documented limit excludes."""
    requests: list[IdRequest] = []
    events: list[Event] = []
    for tenant in tenants:
        times = sorted(rnd.sample(range(10, 300, 3), rnd.randint(1, max_requests)))
        moved: set[str] = set()
        for t in times:
            old = rnd.choice(IDS)
            kind = rnd.choices(("convert", "merge", "delete"), (5, 3, 2))[0]
            targets = [i for i in IDS if i != old and i not in moved]
            new = None if kind == "delete" or not targets else rnd.choice(targets)
            kind = "delete" if new is None else kind
            requests.append(IdRequest(t, f"r{len(requests)}", tenant, kind, old, new))  # type: ignore[arg-type]
            moved.add(old)
        bounds = [0, *times, 400]
        used: set[int] = set()
        for j in range(rnd.randint(1, max_rows)):
            owner = rnd.choice(IDS)
            seg = rnd.randrange(len(bounds) - 1)  # versions in (bounds[seg], bounds[seg + 1]]
            free = [v for v in range(bounds[seg] + 1, bounds[seg + 1] + 1) if v not in used]
            for v in rnd.sample(free, min(len(free), rnd.randint(1, 3))):
                used.add(v)
                cells = {c: f"{c}{len(events)}" for c in ("body", "kind") if rnd.random() < 0.7} or {
                    "body": "b"
                }
                events.append(activity(f"{tenant}-e{len(events)}", tenant, owner, f"{owner}{j}", v, **cells))
        for _ in range(rnd.randint(0, 3)):
            v = rnd.randrange(1, 400)
            events.append(
                status(f"{tenant}-e{len(events)}", tenant, rnd.choice(IDS), rnd.choice(("new", "won")), v)
            )
    held = [i for i in range(len(events)) if rnd.random() < 0.15]
    items: list[tuple] = [("event", i) for i in range(len(events)) if i not in held]
    items += [("request", i) for i in range(len(requests))]
    items += [("event", i) for i in range(len(events)) if i not in held and rnd.random() < 0.2]
    items += [("request", i) for i in range(len(requests)) if rnd.random() < 0.2]
    items += [(rnd.choice(("map", "apply", "job")),) for _ in range(rnd.randint(1, max_points))]
    rnd.shuffle(items)
    if rnd.random() < flip_share:  # the documented limit, in a tenant of its own: p->q, p->r, p->q again
        tenant = f"{tenants[0]}-flip"
        n = len(requests)
        requests += [IdRequest(t, f"r{n + k}", tenant, "convert", "p", new)  # type: ignore[arg-type]
                     for k, (t, new) in enumerate(((50, "q"), (60, "r"), (70, "q")))]  # fmt: skip
        events.append(activity(f"{tenant}-e{len(events)}", tenant, "p", "p0", 90, body="late"))
        flip = [("event", len(events) - 1)]
        for k in range(3):
            flip += [("request", n + k), ("apply",)]
        spots = sorted(rnd.randrange(len(items) + 1) for _ in flip)
        for offset, (spot, item) in enumerate(zip(spots, flip, strict=True)):
            items.insert(spot + offset, item)
    replays = [i for i in range(len(events)) if rnd.random() < 0.1]
    return History(requests, events, items, held + replays)


def final_owner(requests: Iterable[IdRequest], tenant: str, ident: str, version: int) -> str | None:
    """The model: follow the requests in execution order (see the module docstring)."""
    ordered = sorted((r for r in requests if r.tenant == tenant), key=lambda r: (r.executed_at, r.request_id))
    current: str | None = ident
    while current is not None:
        moves = [r for r in ordered if r.old_id == current]
        later = [r for r in moves if r.executed_at >= version]
        if later:
            current = later[0].new_id
        elif moves:
            current = moves[-1].new_id
        else:
            return current
    return None


def model_rows(history: History) -> tuple[dict, dict]:
    """``owner_activity`` and ``owner_log`` as the model has them: ``{key: {column: (value, version)}}``."""
    acts: dict[tuple, dict[str, tuple[object, int]]] = {}
    logs: dict[tuple, dict[str, tuple[object, int]]] = {}
    for e in history.events:
        p = e.payload
        final = final_owner(history.requests, p["tenant"], p["owner"], e.version)
        if final is None:
            continue
        if e.type == "owner.status":
            logs[(p["tenant"], final, e.occurred_at, e.event_id)] = {"state": (p["status"], e.version),
                                                                     "by": (p["by"], e.version)}  # fmt: skip
            continue
        row = acts.setdefault((p["tenant"], final, p["activity"]), {})
        for c in ("body", "kind"):
            if c in p and (c not in row or row[c][1] < e.version):
                row[c] = (p[c], e.version)
    return acts, logs


def flips(history: History) -> set[str]:
    """The tenants where some write's final comes back to an id a tombstone at its version was
    already written under (its cell left that id on an earlier apply), following the delivery."""
    delivered: list[IdRequest] = []
    published: list[IdRequest] = []
    live: dict[int, set[str]] = {}
    gone: dict[int, set[str]] = {}

    def arrive(i: int) -> None:
        e = history.events[i]
        q = final_owner(published, e.payload["tenant"], e.payload["owner"], e.version)
        places = live.setdefault(i, set())  # a dropped write is kept: a later apply places it
        if q is not None and q not in gone.setdefault(i, set()):
            places.add(q)

    def apply(requests: list[IdRequest]) -> set[str]:
        flipped: set[str] = set()
        for i, places in live.items():
            e = history.events[i]
            final = final_owner(requests, e.payload["tenant"], e.payload["owner"], e.version)
            for p in sorted(places - {final}):
                gone.setdefault(i, set()).add(p)
            places.intersection_update({final})
            if final is not None:
                if final in gone.get(i, ()):
                    flipped.add(e.payload["tenant"])
                else:
                    places.add(final)
        return flipped

    flipped: set[str] = set()
    for item in history.arrival:
        if item[0] == "event":
            arrive(item[1])
        elif item[0] == "request":
            delivered.append(history.requests[item[1]])
        else:
            if item[0] in ("apply", "job"):
                flipped |= apply(list(delivered))
            if item[0] in ("map", "job"):
                published = list(delivered)
    return flipped | apply(history.requests)


def stored(rows: Iterable, key: tuple[str, ...]) -> dict[tuple, dict[str, tuple[object, int]]]:
    """Rows as read, in the model's shape."""
    return {
        tuple(r.key[k] for k in key): {n: (c.value, c.writetime) for n, c in r.cells.items()} for r in rows
    }
