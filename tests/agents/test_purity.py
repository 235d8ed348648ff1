"""handle() is pure: same event, same mutations; no clock, no randomness, no mutation of its input."""

from __future__ import annotations

import copy
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import reference_agents
from agents.event_types import topic_of
from examples.activity_platform.generator import generate_history
from framework.core.events import parse_event

AGENTS = {a.topic: a for a in reference_agents()}
EVENTS = generate_history(seed=11, n_events=600).distinct()


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("handle() read the clock or a random generator")


@pytest.fixture()
def no_clock_no_random(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("time", "time_ns", "monotonic", "perf_counter"):
        monkeypatch.setattr(time, name, _forbidden)
    for name in ("random", "randint", "getrandbits", "choice"):
        monkeypatch.setattr(random, name, _forbidden)


@pytest.mark.usefixtures("no_clock_no_random")
def test_every_generated_event_maps_without_clock_or_randomness() -> None:
    for e in EVENTS:
        before = copy.deepcopy(e.to_dict())
        first = list(AGENTS[topic_of(e.type)].handle(e))
        assert first, e.type
        assert e.to_dict() == before  # the event is not mutated
        assert list(AGENTS[topic_of(e.type)].handle(e)) == first


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(EVENTS) - 1))
def test_same_event_same_mutations_across_instances_and_encodings(index: int) -> None:
    e = EVENTS[index]
    fresh = {a.topic: a for a in reference_agents()}
    decoded = parse_event(e.to_json())  # what the runtime hands over after a replay from Kafka
    expected = list(AGENTS[topic_of(e.type)].handle(e))
    assert list(fresh[topic_of(e.type)].handle(decoded)) == expected
    for m in expected:
        assert m.version == e.version  # versions come from the event, never the clock
