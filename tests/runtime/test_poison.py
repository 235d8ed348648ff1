"""Poison and the classification rule: what decoding, validating or mapping raises is the
message's (parked at once, never retried as transient); an unparseable message holds its
key's lane; a long event id still gets its document. Real SQLite store and the kit's
in-memory index (``Driver``); the per-key lane check runs the real processor."""

from __future__ import annotations

import json

import pytest

from framework.core.events import EventError, parse_event
from framework.runtime.errors import is_transient
from framework.runtime.processor import AgentProcessor, parse_work
from framework.runtime.work import Work
from framework.testing import Driver, make_event
from tests.testing.apps import ITEMS, ItemsAgent, shop

DEEP = b'{"event_id":"e","payload":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HUGE_INT = b'{"event_id":"e","ordering_key":"a","version":' + b"7" * 5000 + b"}"


@pytest.mark.parametrize("raw", [DEEP, HUGE_INT], ids=["nested-100000", "int-5000-digits"])
def test_hostile_json_is_a_parse_error_not_a_crash(raw: bytes) -> None:
    with pytest.raises(EventError, match="nested deeper|not acceptable JSON"):
        parse_event(raw)
    with pytest.raises(Exception) as info:
        parse_work(Work("t", 0, b"a", raw))
    assert not is_transient(info.value)  # parked, not retried as if a sink were down


def test_nesting_within_the_limit_is_accepted() -> None:
    payload: dict = {}
    inner = payload
    for _ in range(40):
        inner["x"] = {}
        inner = inner["x"]
    raw = json.dumps({"event_id": "e", "ordering_key": "a", "version": 1, "occurred_at": 1,
                      "type": "t", "payload": payload})  # fmt: skip
    assert parse_event(raw).type == "t"


def test_poison_is_parked_at_parse_and_the_key_moves_on() -> None:
    with Driver(shop()) as driver:
        parked = driver.send([DEEP, HUGE_INT], topic=ItemsAgent.topic)
        assert [(p.stage, type(p.error).__name__) for p in parked] == [("parse", "EventError")] * 2
        assert driver.send(make_event("item.set", {"item": "a", "name": "ok"}, key="a")) == []
        assert driver.row(ITEMS.name, {"item_id": "a"}) is not None


def test_an_unparseable_message_holds_the_lane_of_its_key() -> None:
    processor = AgentProcessor(ItemsAgent(), [])
    bad = Work("t", 0, b"a", b"{not json")
    good = Work("t", 1, b"a", make_event("item.set", {"item": "a", "name": "x"}, key="a").to_json())
    processor.prepare(bad)
    processor.prepare(good)
    assert bad.event is None and bad.relation == good.relation == "a"


def test_a_long_event_id_still_gets_its_document() -> None:
    """The change record's id no longer embeds the event id, so a 511-character id (the
    envelope allows 512) is indexed like any other."""
    event = make_event("item.set", {"item": "a", "name": "Lamp"}, key="a", version=3, event_id="e" * 511)
    with Driver(shop()) as driver:
        assert driver.send(event) == []
        assert driver.documents("catalog")["a"][1] == 3
