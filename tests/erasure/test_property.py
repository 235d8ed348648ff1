"""Property: subjects are erased whatever their spelling, whatever the delivery (test kit).

Each example is a random history of the notes app (``histories``): its events
delivered shuffled and duplicated, the erasure of one or two addresses
(each requested in a random spelling) at a random point of the delivery,
then more replays and a full replay (what a backfill of the archive sends).
After it the store equals the model of ``histories`` (people exactly; notes
never listing an erased address exactly, the others with nothing of a
subject), no key or cell holds an erased address in any spelling, and
``verify`` finds no residue.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.erasure import Subject, erase, verify
from framework.testing import Driver
from tests.erasure.conftest import KEY
from tests.erasure.histories import check_notes, delivery, history, mentions_erased, model_people
from tests.erasure.notes_app import app

_KEY = KEY.encode()


def _cells(row) -> dict:  # type: ignore[no-untyped-def]
    return {c: (cell.value, cell.writetime) for c, cell in row.cells.items()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(0, 1000))
def test_erased_subjects_stay_erased_for_any_delivery(rng: random.Random, cut: int) -> None:
    hist = history(rng, 0)
    sent = delivery(rng, hist.events)
    at = cut % (len(sent) + 1)
    with Driver(app) as d:
        d.send(sent[:at])
        for value in hist.requests:
            d.run(erase(app, Subject("email", value), key=_KEY, store=d.store))
        d.send(sent[at:])
        d.send(delivery(rng, hist.events))  # replays, then the whole archive again
        d.send(list(hist.events))
        people = {str(r.key["email"]): _cells(r) for r in d.rows("person")}
        notes = {str(r.key["note_id"]): _cells(r) for r in d.rows("note")}
        assert people and people == model_people(hist)
        check_notes(hist, notes)
        texts = [*people, *(str(v) for cells in notes.values() for v, _ in cells.values())]
        texts += [str(v) for cells in people.values() for v, _ in cells.values()]
        assert mentions_erased(hist, texts) == []
        for value in hist.requests:
            assert d.run(verify(app, Subject("email", value.swapcase()), key=_KEY, store=d.store)) == []
        assert not d.parked
