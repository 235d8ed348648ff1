"""Property: no ID-mutation request, early or late, routes an erased subject back (test kit).

The histories of ``tests.idmutation.late_histories`` (ids converted, merged and deleted several
times, the map published and applied at random points with the requests delivered so far, then
all of them; rows delivered shuffled, duplicated and replayed), where some activity rows are a
subject's (every write of the row has an address as its body, in a random spelling) and the
app declares such a row personal data (the row goes). The subjects are erased at a random point
of the delivery. The model, written here: ``late_histories.model_rows`` (each write under the
final owner found by following the requests in execution order) without the subjects' rows.
Histories the documented ID-mutation limit excludes (a final that comes back) are left out of
the comparison, as in ``tests/idmutation/test_late_requests_property.py``.
"""

from __future__ import annotations

import dataclasses
import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from framework import App, PersonalData
from framework.erasure import Subject, erase, verify
from framework.idmutation import IdRequest, collapse
from framework.idmutation.apply import apply_id_map
from framework.testing import Driver
from tests.erasure.conftest import KEY
from tests.erasure.histories import respell
from tests.idmutation.late_histories import History, flips, make_history, model_rows, stored
from tests.idmutation.stream_app import NoteAgent, OwnerAgent
from tests.idmutation.stream_app import app as stream_app

_KEY = KEY.encode()
ADDRESSES = ("ann@x.io", "bo.li@y.org")
ACT_KEY = ("tenant", "owner_id", "activity_id")
PERSONAL = PersonalData("email", "owner_activity", columns=("body",), normalize=str.lower)
app = App("owner-erasure", agents=[OwnerAgent(), NoteAgent()], id_mutation=stream_app.id_mutation,
          personal_data=[PERSONAL])  # fmt: skip


def _with_subjects(rnd: random.Random) -> tuple[History, dict[tuple[str, str], str]]:
    """A late-requests history whose rows are, at random, a subject's: ``{(tenant, activity): address}``."""
    history = make_history(rnd, flip_share=0.1)
    rows = sorted(
        {(e.payload["tenant"], e.payload["activity"]) for e in history.events if "activity" in e.payload}
    )
    owned = {row: rnd.choice(ADDRESSES) for row in rows if rnd.random() < 0.4}
    events = []
    for e in history.events:
        address = owned.get((e.payload["tenant"], e.payload.get("activity")))
        if address is not None:
            e = dataclasses.replace(e, payload={**e.payload, "body": respell(rnd, address)})
        events.append(e)
    return dataclasses.replace(history, events=events), owned


def _run(d: Driver, history: History, erase_at: int, erased: list[str]) -> None:
    delivered: list[IdRequest] = []

    def job(requests: list[IdRequest], apply: bool, publish: bool) -> None:
        if apply:  # the job's apply, with the deny-list's verdict as the job gives it
            screen = d.screen.current if d.screen is not None else None
            erased_cells = screen.verdict if screen is not None else None
            config = app.id_mutation
            assert config is not None
            d.run(apply_id_map(d.store, config, collapse(requests), clock=time.time, erased=erased_cells))
        if publish:
            d.id_job(requests, apply=False, publish=True)

    for n, item in enumerate(history.arrival):
        if n == erase_at:
            for value in erased:
                d.run(erase(app, Subject("email", value), key=_KEY, store=d.store))
            d.send([])  # the driver reloads its deny-list
        if item[0] == "event":
            assert d.send(history.events[item[1]]) == []
        elif item[0] == "request":
            delivered.append(history.requests[item[1]])
        else:
            job(list(delivered), apply=item[0] != "map", publish=item[0] != "apply")
    if erase_at >= len(history.arrival):
        for value in erased:
            d.run(erase(app, Subject("email", value), key=_KEY, store=d.store))
        d.send([])
    job(history.requests, apply=True, publish=True)
    for i in history.tail:
        assert d.send(history.events[i]) == []


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 1000))
def test_no_request_routes_an_erased_subject_back(rnd: random.Random, cut: int) -> None:
    history, owned = _with_subjects(rnd)
    erased = [respell(rnd, a) for a in ADDRESSES]
    acts, _ = model_rows(history)
    excluded = flips(history)
    expected = {k: v for k, v in acts.items() if (k[0], k[2]) not in owned and k[0] not in excluded}
    with Driver(app) as d:
        _run(d, history, cut % (len(history.arrival) + 1), erased)
        live = {k: v for k, v in stored(d.rows("owner_activity"), ACT_KEY).items() if k[0] not in excluded}
        assert live == expected
        for value in erased:
            assert d.run(verify(app, Subject("email", value.swapcase()), key=_KEY, store=d.store)) == []
        assert d.parked == []
