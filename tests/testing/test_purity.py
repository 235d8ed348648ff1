"""assert_pure: passes a pure agent, names the clock, randomness, I/O, payload mutation and
nondeterminism of impure ones."""

from __future__ import annotations

import datetime
import itertools
import logging
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import datetime as imported_datetime
from time import time as imported_time

import pytest

from framework import BadMessage, Event, Upsert
from framework.core.mutations import Mutation
from framework.testing import assert_pure, make_event
from tests.testing.apps import ItemsAgent

EVENTS = [
    make_event("item.set", {"item": "a", "name": "Lamp", "price": 3}, version=10),
    make_event("item.deleted", {"item": "a"}, version=20),
    make_event("item.status", {"item": "a", "state": "sold", "by": "ann"}, version=30, occurred_at=1),
]


def test_a_pure_agent_passes_and_its_mutations_come_back() -> None:
    out = assert_pure(ItemsAgent(), EVENTS)
    assert [type(ms[0]).__name__ for ms in out] == ["Upsert", "Delete", "LogState"]


def test_raising_the_same_error_for_a_bad_event_is_pure() -> None:
    assert assert_pure(ItemsAgent(), [make_event("item.set", {"name": "no item"})]) == [[]]


def test_logging_inside_handle_is_allowed() -> None:
    class Logging(ItemsAgent):
        def handle(self, event: Event) -> Iterable[Mutation]:
            logging.getLogger("kit-test").warning("mapping %s", event.event_id)
            return super().handle(event)

    assert len(assert_pure(Logging(), EVENTS)) == 3


def _agent(effect: object) -> ItemsAgent:
    class Impure(ItemsAgent):
        def handle(self, event: Event) -> Iterable[Mutation]:
            effect()  # type: ignore[operator]
            return super().handle(event)

    return Impure()


def _connect() -> None:
    with socket.socket() as s:
        s.connect(("127.0.0.1", 9))


@pytest.mark.parametrize(
    ("effect", "named"),
    [
        (lambda: imported_time(), "time.time()"),
        (lambda: __import__("time").monotonic(), "time.monotonic()"),
        (lambda: datetime.datetime.now(), "datetime.now()"),
        (lambda: imported_datetime.utcnow(), "datetime.utcnow()"),
        (lambda: datetime.date.today(), "date.today()"),
        (lambda: random.random(), "random.random()"),
        (lambda: uuid.uuid4(), "uuid.uuid4()"),
        (lambda: open("/etc/hostname"), "open()"),  # noqa: SIM115
        (_connect, "socket.connect()"),
        (lambda: socket.getaddrinfo("localhost", 80), "socket.getaddrinfo()"),
        (lambda: __import__("subprocess").run(["true"]), "subprocess.Popen()"),
    ],
)
def test_clock_randomness_and_io_are_named(effect: object, named: str) -> None:
    with pytest.raises(
        AssertionError, match=rf"Impure\.handle on event .* is not pure: .*{re.escape(named)}"
    ):
        assert_pure(_agent(effect), EVENTS[:1])


def test_a_caught_violation_is_still_reported() -> None:
    def swallowed() -> None:
        try:
            imported_time()
        except Exception:  # noqa: BLE001, S110 - what a careless agent does
            pass

    with pytest.raises(AssertionError, match=r"called time\.time\(\) \(and caught the error\)"):
        assert_pure(_agent(swallowed), EVENTS[:1])


def test_other_threads_keep_the_real_clock_while_a_check_runs() -> None:
    """A library's background thread (py4j's, say) sleeping or reading the clock during the
    check is not the agent's doing: it gets the real function, and the check passes."""
    inside = threading.Event()
    seen: list[object] = []

    def background() -> None:
        inside.wait(5)
        seen.extend([time.sleep(0), time.time(), datetime.datetime.now()])

    worker = threading.Thread(target=background)
    worker.start()

    def wait_for_background() -> None:
        inside.set()
        worker.join(5)

    assert len(assert_pure(_agent(wait_for_background), EVENTS[:1])) == 1
    assert seen[0] is None and seen[1] > 0 and isinstance(seen[2], datetime.datetime)


def test_the_guard_is_lifted_afterwards() -> None:
    with pytest.raises(AssertionError):
        assert_pure(_agent(lambda: imported_time()), EVENTS[:1])
    assert imported_time() > 0 and datetime.datetime.now().year > 2000 and random.random() < 1


def test_mutating_the_payload_is_caught() -> None:
    class Mutating(ItemsAgent):
        def handle(self, event: Event) -> Iterable[Mutation]:
            out = list(super().handle(event))
            event.payload["seen"] = True  # type: ignore[index]
            return out

    with pytest.raises(AssertionError, match="changed the event's payload"):
        assert_pure(Mutating(), EVENTS[:1])


def test_hidden_state_is_caught_as_nondeterminism() -> None:
    class Counter(ItemsAgent):
        calls = itertools.count()

        def handle(self, event: Event) -> Iterable[Mutation]:
            return [Upsert("items", {"item_id": "a"}, {"price": next(self.calls)}, event.version)]

    with pytest.raises(AssertionError, match="is not deterministic"):
        assert_pure(Counter(), EVENTS[:1])


def test_a_mapping_that_depends_on_the_payload_container_type_is_caught() -> None:
    class TupleOnly(ItemsAgent):
        def handle(self, event: Event) -> Iterable[Mutation]:
            if not isinstance(event.payload.get("tags"), tuple):
                raise BadMessage("payload.tags: not a tuple")
            return [Upsert("items", {"item_id": "a"}, {"name": "x"}, event.version)]

    tagged = make_event("item.set", {"item": "a", "tags": ("x",)})
    with pytest.raises(AssertionError, match="as the worker delivers it"):
        assert_pure(TupleOnly(), [tagged])


# -- agents with lookups: handle(event, state) ---------------------------------------------------
def _children() -> list[Event]:
    from tests.state.join_app import child

    return [child("m1", "c1", "hello", 10), child("m2", "c2", "bye", 20)]


def test_an_agent_with_lookups_is_checked_with_the_entries_given() -> None:
    from framework.state import Entry
    from tests.state.join_app import ChildAgent

    state = {"parent": {"c1": {"parent": "A", "label": "a"}, "c2": Entry({"parent": "B", "label": "b"}, 7)}}
    out = assert_pure(ChildAgent(), _children(), state=state)
    assert [(m.key["parent"], m.cells["label"]) for (m,) in out] == [("A", "a"), ("B", "b")]  # type: ignore[attr-defined]
    # a missing entry is an outcome like an error: the same each time, no mutations
    only_c1 = {"parent": {"c1": {"parent": "A", "label": "a"}}}
    assert assert_pure(ChildAgent(), _children(), state=only_c1) == [out[0], []]


def test_reading_other_entries_for_an_equal_event_is_caught() -> None:
    from framework.state import StateView
    from tests.state.join_app import ChildAgent

    calls = itertools.count()

    class Wandering(ChildAgent):
        def handle(self, event: Event, state: StateView) -> Iterable[Mutation]:  # type: ignore[override]
            if next(calls) % 2:
                state.get("parent", "c2")  # an extra read, every other call
            return super().handle(event, state)

    state = {"parent": {"c1": {"parent": "A", "label": "a"}, "c2": {"parent": "B", "label": "b"}}}
    with pytest.raises(AssertionError, match="read different lookup entries"):
        assert_pure(Wandering(), _children()[:1], state=state)


def test_impurity_inside_a_lookup_agent_is_named_and_bad_state_is_refused() -> None:
    from framework.state import StateView
    from tests.state.join_app import ChildAgent

    class Clocked(ChildAgent):
        def handle(self, event: Event, state: StateView) -> Iterable[Mutation]:  # type: ignore[override]
            time.time()
            return super().handle(event, state)

    state = {"parent": {"c1": {"parent": "A", "label": "a"}}}
    with pytest.raises(AssertionError, match=re.escape("time.time()")):
        assert_pure(Clocked(), _children()[:1], state=state)
    with pytest.raises(ValueError, match="does not declare"):
        assert_pure(ChildAgent(), _children(), state={"nope": {}})
    with pytest.raises(ValueError, match="declares no lookups"):
        assert_pure(ItemsAgent(), EVENTS, state={"parent": {}})
