"""handle() is pure: same event, same mutations; no clock, randomness or I/O; its input untouched."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import reference_agents
from examples.activity_platform.generator import generate_history
from framework import KeyedAgent
from framework.core.events import parse_event
from framework.testing import assert_pure

EVENTS = generate_history(seed=11, n_events=600).distinct()
AGENTS = {a.name: a for a in reference_agents()}


@pytest.mark.parametrize("agent", reference_agents(), ids=lambda a: a.name)
def test_every_generated_event_maps_purely(agent: KeyedAgent) -> None:
    events = [e for e in EVENTS if e.type in agent.event_types]
    assert len(events) > 20
    for e, mutations in zip(events, assert_pure(agent, events), strict=True):
        assert mutations, e.type
        assert all(m.version == e.version for m in mutations)  # versions come from the event


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(EVENTS) - 1))
def test_same_event_same_mutations_across_instances(index: int) -> None:
    e = EVENTS[index]
    [fresh] = [a for a in reference_agents() if e.type in a.event_types]
    [shared] = [a for a in AGENTS.values() if e.type in a.event_types]
    assert list(fresh.handle(parse_event(e.to_json()))) == list(shared.handle(e))
