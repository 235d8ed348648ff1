"""The in-memory Driver: the worker's processing steps on SQLite and the in-memory index."""

from __future__ import annotations

import pytest

from framework import App
from framework.core.events import EventError
from framework.core.schema import SchemaError
from framework.testing import Driver, Timeline, make_event
from stores.errors import PermanentStoreError
from tests.testing.apps import ITEM_STATUS, ITEMS, STATUS_PRECEDENCE, CatalogProjection, ItemsAgent, shop


@pytest.fixture()
def driver() -> Driver:
    with Driver(shop()) as d:
        yield d


def test_rows_documents_and_state_after_send(driver: Driver) -> None:
    t = Timeline(start=10)
    t.add("item.set", {"item": "a", "name": "Lamp", "price": 30})
    t.add("item.set", {"item": "a", "price": 25})
    t.add("item.status", {"item": "a", "state": "listed", "by": "ann"}, occurred_at=5)
    t.add("item.set", {"item": "b", "name": "Desk"})
    assert driver.send(t) == []
    a = driver.row(ITEMS.name, {"item_id": "a"})
    assert a is not None and a.values() == {"name": "Lamp", "price": 25}
    assert (a.writetime("name"), a.writetime("price")) == (10, 1_010)
    assert [r.key["item_id"] for r in driver.rows(ITEMS.name)] == ["a", "b"]
    [log] = driver.partition(ITEM_STATUS.name, {"item_id": "a"})
    assert log.key["at"] == 5 and log.values() == {"state": "listed", "by": "ann"}
    state = driver.state(ITEM_STATUS.name, {"item_id": "a"}, STATUS_PRECEDENCE)
    assert state is not None and (state.state, state.version) == ("listed", 2_010)
    # the document's version is the partition's version mark: the log write at 2010 counts
    assert driver.documents("catalog") == {
        "a": ({"item_id": "a", "name": "Lamp", "price": 25, "status": "listed"}, 2_010),
        "b": ({"item_id": "b", "name": "Desk"}, 3_010),
    }
    assert driver.documents(CatalogProjection()) == driver.documents("catalog")
    marks = {r.key["item_id"]: r.values()["version"] for r in driver.rows("catalog_version")}
    assert marks == {"a": 2_010, "b": 3_010}


def test_a_delete_removes_the_document_at_the_mark_and_older_writes_stay_out(driver: Driver) -> None:
    driver.send(make_event("item.set", {"item": "a", "name": "Lamp"}, version=10))
    driver.send(make_event("item.deleted", {"item": "a"}, version=20))
    assert driver.rows(ITEMS.name) == [] and driver.documents("catalog") == {}
    hit = driver.run(driver.index.get("catalog", "a"))
    assert hit is None
    driver.send(make_event("item.set", {"item": "a", "name": "Old"}, version=15))  # late, shadowed
    assert driver.documents("catalog") == {}
    driver.send(make_event("item.set", {"item": "a", "name": "New"}, version=30))
    assert driver.documents("catalog") == {"a": ({"item_id": "a", "name": "New"}, 30)}


def test_every_bad_message_is_parked_with_its_stage(driver: Driver) -> None:
    no_item = make_event("item.set", {"name": "x"})
    unknown = make_event("item.painted", {"item": "a"})
    bogus = make_event("item.bogus", {"item": "a"})
    parked = driver.send([b"{not json", unknown, no_item, bogus])
    assert [(p.event, p.stage, type(p.error)) for p in parked] == [
        (b"{not json", "parse", EventError),
        (unknown, "route", EventError),
        (no_item, "map", type(parked[2].error)),
        (bogus, "sink", SchemaError),
    ]
    assert "payload.item" in str(parked[2].error)
    assert driver.parked == parked
    assert driver.rows(ITEMS.name) == [] and driver.documents("catalog") == {}
    assert driver.send(make_event("item.set", {"item": "a", "name": "ok"})) == []  # the key moves on


def test_a_projection_failure_is_parked_at_sink_with_the_change_record() -> None:
    class Unencodable(CatalogProjection):
        def build(self, key, rows):  # type: ignore[no-untyped-def]
            return {"when": object()}

    app = App("broken-doc", agents=[ItemsAgent()], projections=[Unencodable()])
    with Driver(app) as driver:
        [p] = driver.send(make_event("item.set", {"item": "a", "name": "x"}, version=7))
    assert p.stage == "sink" and isinstance(p.error, PermanentStoreError)
    assert "a: doc: is not JSON-serialisable" in str(p.error)
    assert p.event.type == "partitions_changed" and p.event.payload == {
        "projection": "catalog",
        "changes": [{"key": {"item_id": "a"}, "version": 7}],
    }


def test_events_travel_as_json_and_raw_messages_are_accepted(driver: Driver) -> None:
    e = make_event("item.set", {"item": "a", "name": "Lamp"}, version=3)
    driver.send(e.to_json().decode())
    assert driver.documents("catalog") == {"a": ({"item_id": "a", "name": "Lamp"}, 3)}
    with pytest.raises(ValueError, match="JSON"):
        driver.send(make_event("item.set", {"item": "a", "name": {1, 2}}))


def test_ttl_cells_expire_on_the_driver_clock_only(driver: Driver) -> None:
    driver.send(make_event("item.flash", {"item": "a", "text": "sale"}, version=5))
    assert driver.row(ITEMS.name, {"item_id": "a"}).values() == {"flash": "sale"}  # type: ignore[union-attr]
    driver.now += 59
    assert driver.row(ITEMS.name, {"item_id": "a"}) is not None
    driver.now += 2
    assert driver.row(ITEMS.name, {"item_id": "a"}) is None


def test_topic_routes_like_the_worker(driver: Driver) -> None:
    [p] = driver.send(make_event("item.set", {"item": "a"}), topic="other-topic")
    assert p.stage == "route" and "other-topic" in str(p.error)


async def test_the_driver_refuses_to_run_inside_an_event_loop() -> None:
    with pytest.raises(RuntimeError, match="synchronous"):
        Driver(shop())
