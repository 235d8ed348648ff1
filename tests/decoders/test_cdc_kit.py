"""The support desk on a CDC topic of its tickets table converges, in the test kit, to the state of
the envelope form of the same history (and to the model), delivered shuffled and replayed."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from framework.decoders import Record
from framework.testing import Driver
from tests.decoders.support_cdc import DECODER, TOPIC_CDC, app, change_value, envelope_app, history


def _table(driver: Driver) -> dict[str, dict[str, Any]]:
    return {
        str(r.key["ticket_id"]): {c: cell.value for c, cell in r.cells.items()} for r in driver.rows("ticket")
    }


def _docs(driver: Driver) -> dict[str, dict[str, Any]]:
    return {k: doc for k, (doc, _) in driver.documents("tickets").items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cdc_topic_converges_to_the_envelope_form(seed: int) -> None:
    h = history(seed)
    with Driver(envelope_app) as envelope:
        assert envelope.send(h.events) == []
        expected, expected_docs = _table(envelope), _docs(envelope)
    assert expected == h.truth
    rng = random.Random(seed)
    for records in (h.records, h.since_snapshot):
        shuffled = records + rng.sample(records, len(records) // 3)  # duplicates
        rng.shuffle(shuffled)
        with Driver(app) as cdc:
            assert cdc.send(shuffled) == []
            assert _table(cdc) == h.truth
            assert _docs(cdc) == expected_docs
            replay = list(records)
            rng.shuffle(replay)
            assert cdc.send(replay) == []  # a replay changes nothing
            assert _table(cdc) == h.truth


def _rec(key: dict[str, Any], value: bytes | None, offset: int = 0) -> Record:
    return Record(json.dumps(key).encode(), value, TOPIC_CDC, 0, offset)


KEY = {"tenant": "t1", "source": "zendesk", "external_id": "7"}
ROW = {**KEY, "subject": "printer", "requester_email": "a@b.io", "requester_name": "A", "priority": "low",
       "assignee": None, "created_at": 1}  # fmt: skip


def test_a_snapshot_row_read_after_a_live_delete_does_not_resurrect_it() -> None:
    # the snapshot starts at LSN 10 (the row exists), the row is deleted at LSN 20 (commit 1000 ms),
    # and the snapshot reads the row 5 s later: its image predates the delete
    snap = _rec(KEY, change_value("r", None, ROW, 1_700_000_006_000, 10, 0, snapshot="true"))
    delete = _rec(KEY, change_value("d", ROW, None, 1_700_000_001_000, 20, 1))
    for order in ([snap, delete], [delete, snap]):
        with Driver(app) as d:
            assert d.send([*order, _rec(KEY, None)]) == []
            assert d.rows("ticket") == []


def test_versions_order_changes_inside_one_transaction_and_across_milliseconds() -> None:
    first = DECODER.decode(_rec(KEY, change_value("c", None, ROW, 5, 100, 1)))
    second = DECODER.decode(_rec(KEY, change_value("u", ROW, {**ROW, "subject": "x"}, 5, 140, 2)))
    later = DECODER.decode(_rec(KEY, change_value("u", ROW, ROW, 6, 150, 1)))
    snap = DECODER.decode(_rec(KEY, change_value("r", None, ROW, 86_400_000 + 6, 90, 0, snapshot="true")))
    assert first.version < second.version < later.version
    assert snap.version == 6_000 < later.version  # read a day minus the window after: below later
    assert first.ordering_key == "t1/zendesk/7" and first.type == "ticket.insert"
    assert first.event_id == DECODER.decode(_rec(KEY, change_value("c", None, ROW, 5, 100, 1))).event_id
    assert first.event_id != second.event_id
    tomb = DECODER.decode(_rec(KEY, None))
    assert tomb.type == "ticket.tombstone" and tomb.version == 0


def _value(**change: Any) -> bytes:
    return json.dumps(change).encode()


SOURCE = {"ts_ms": 5, "lsn": 100, "table": "tickets"}
POISON = [
    ("no position", _rec(KEY, _value(op="c", after=ROW, source={"ts_ms": 5}))),
    ("no commit time", _rec(KEY, _value(op="c", after=ROW, source={"lsn": 5}))),
    ("no source", _rec(KEY, _value(op="u", before=ROW, after=ROW))),
    ("unknown op", _rec(KEY, _value(op="t", source=SOURCE))),
    ("after not a row", _rec(KEY, _value(op="c", after=[1], source=SOURCE))),
    ("delete with after", _rec(KEY, _value(op="d", before=ROW, after=ROW, source=SOURCE))),
    ("key differs from row", _rec({**KEY, "external_id": "8"}, _value(op="c", after=ROW, source=SOURCE))),
    ("key lacks a column", _rec({"tenant": "t1"}, _value(op="c", after=ROW, source=SOURCE))),
    ("not JSON", _rec(KEY, b"\x00\x01garbage")),
    ("no key", Record(None, _value(op="c", after=ROW, source=SOURCE), TOPIC_CDC)),
    ("negative ts", _rec(KEY, _value(op="c", after=ROW, source={"ts_ms": -1, "lsn": 1}))),
]


def test_poison_is_parked_at_parse_with_its_class_and_the_rest_goes_on() -> None:
    good = _rec(KEY, change_value("c", None, ROW, 5, 100, 1))
    with Driver(app) as d:
        parked = d.send([r for _, r in POISON] + [good])
        assert [(p.stage, type(p.error).__name__) for p in parked] == [("parse", "DecodeError")] * len(POISON)
        assert [p.event for p in parked] == [r.value for _, r in POISON]
        assert len(d.rows("ticket")) == 1


def test_an_app_refuses_a_lookup_on_a_decoded_topic() -> None:
    from framework import App
    from framework.state import Lookup
    from tests.decoders.support_cdc import TicketCdcAgent, TicketRowAgent

    by_subject = Lookup("by_subject", TOPIC_CDC, key=lambda e: e.payload.get("after", {}).get("subject"),
                        value=lambda e: {"key": e.ordering_key})  # fmt: skip

    class Reader(TicketRowAgent):
        name = "reader"
        event_types = ("reader.x",)
        lookups = (by_subject,)

    with pytest.raises(ValueError, match="lookups read envelopes"):
        App("refused", agents=[TicketCdcAgent(), Reader()])
