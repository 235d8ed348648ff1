"""Property: a join agent's rows never bring an erased subject back, whatever the delivery (test kit).

Each example is a random history of the join test app (``tests/state/join_app.py``) declaring
a message whose body is an address as personal data (the row goes): conversations moved between
parents by ``parent.set`` entries (re-mapping their messages), messages whose body is an address
in a random spelling or plain text. The events are delivered shuffled and duplicated, one or two
addresses are erased (requested in a random spelling) at a random point, then more replays and
the whole archive again. The model, written here: each message of a body not erased is one row
under its conversation's final parent (the ``parent.set`` of highest version) with that
parent's label; nothing else. Nothing is parked or pending, and ``verify`` finds no residue.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.erasure import Subject, erase, verify
from framework.testing import Driver
from tests.erasure.conftest import KEY
from tests.erasure.histories import delivery, respell
from tests.erasure.test_join_screen import join_app
from tests.state.join_app import child, parent_set

_KEY = KEY.encode()
ADDRESSES = ("ann@x.io", "bo.li@y.org", "cy@z.net")
app = join_app()


def history(rng: random.Random, h: str = "") -> tuple[list[Event], list[str]]:
    """The events (entries, then messages: any order is delivered anyway) and the erased addresses;
    every key, id and address of history ``h`` starts with ``h`` (disjoint histories)."""
    events: list[Event] = []
    addresses = [f"{h}{a}" for a in ADDRESSES]
    convs = [f"{h}c{i}" for i in range(rng.randint(1, 3))]
    for conv in convs:
        for version in rng.sample(range(1, 400), rng.randint(1, 3)):
            parent = h + rng.choice(("P0", "P1", "P2"))
            events.append(parent_set(conv, parent, f"label-{parent}-{version}", version))
    for m in range(rng.randint(1, 6)):
        body = respell(rng, rng.choice(addresses)) if m and rng.random() < 0.6 else f"plain {m}"
        events.append(child(f"{h}m{m}", rng.choice(convs), body, rng.randint(1, 400)))
    erased = rng.sample(addresses, rng.randint(1, 2))
    return events, [respell(rng, a) for a in erased]


def model(events: list[Event], erased: list[str]) -> dict[tuple[str, str], dict[str, object]]:
    final = {}
    for e in sorted((e for e in events if e.type == "parent.set"), key=lambda e: e.version):
        final[e.payload["conv"]] = e.payload
    gone = {a.lower() for a in erased}
    out: dict[tuple[str, str], dict[str, object]] = {}
    for e in events:
        p = e.payload
        if e.type == "child.posted" and p["body"].lower() not in gone:
            parent = final[p["conv"]]
            out[(parent["parent"], p["msg_id"])] = {
                "body": p["body"],
                "conv": p["conv"],
                "label": parent["label"],
            }
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(0, 1000))
def test_join_rows_keep_erased_subjects_out_for_any_delivery(rng: random.Random, cut: int) -> None:
    events, erased = history(rng)
    sent = delivery(rng, events)
    at = cut % (len(sent) + 1)
    with Driver(app) as d:
        d.send(sent[:at])
        for value in erased:
            d.run(erase(app, Subject("email", value), key=_KEY, store=d.store))
        d.send(sent[at:])
        d.send(delivery(rng, events))  # replays, then the whole archive again
        d.send(list(events))
        rows = {(str(r.key["parent"]), str(r.key["msg_id"])): r.values() for r in d.rows("msg")}
        assert rows and rows == model(events, erased)  # a plain message always has a row
        assert d.parked == [] and d.pending()["children"] == []
        for value in erased:
            assert d.run(verify(app, Subject("email", value.swapcase()), key=_KEY, store=d.store)) == []
