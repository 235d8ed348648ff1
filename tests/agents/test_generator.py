"""The history generator: deterministic, realistic, and as disorderly as promised."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import reference_agents
from agents.event_types import TOPIC_ACTIVITIES, TOPIC_INSIGHTS, topic_of
from agents.identity import ActivityRef
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import expected_state


@pytest.fixture(scope="module")
def big() -> History:
    return generate_history(seed=7, n_events=3000, n_orgs=12)


def test_deterministic_per_seed() -> None:
    a, b = generate_history(5, 400), generate_history(5, 400)
    assert [e.to_dict() for e in a.events] == [e.to_dict() for e in b.events]
    assert a.truth == b.truth and a.stats == b.stats
    assert [e.to_dict() for e in generate_history(6, 400).events] != [e.to_dict() for e in a.events]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 300))
def test_exact_size_unique_ids_and_replays_are_identical(seed: int, n: int) -> None:
    h = generate_history(seed, n, n_orgs=3)
    by_id: dict[str, dict] = {}
    for e in h.events:
        assert by_id.setdefault(e.event_id, e.to_dict()) == e.to_dict()  # same id, same event
    assert len(by_id) == n == h.stats.distinct
    assert len(h.events) == h.stats.delivered == n + h.stats.duplicates + h.stats.replayed


def test_duplicates_replays_delays_and_disorder(big: History) -> None:
    s = big.stats
    assert s.duplicates == 150  # 5% of the distinct events, delivered again right away
    assert s.replayed >= 100 and s.delayed > 0
    first: dict[str, int] = {}
    near, far = 0, 0
    for i, e in enumerate(big.events):
        if e.event_id in first:
            near += i - first[e.event_id] <= 4
            far += i - first[e.event_id] > 20
        else:
            first[e.event_id] = i
    assert near >= s.duplicates * 0.8 and far > 20  # exact duplicates close by, replays of old events later
    assert s.out_of_order > 100
    assert s.insight_first > 10


def test_every_event_is_valid_for_its_agent(big: History) -> None:
    agents = {a.topic: a for a in reference_agents()}
    for e in big.distinct():
        assert list(agents[topic_of(e.type)].handle(e))


def test_one_ordering_key_per_hub_across_topics(big: History) -> None:
    keys: dict[str, set[str]] = defaultdict(set)
    topics: dict[str, set[str]] = defaultdict(set)
    for e in big.events:
        ref = ActivityRef(e.payload["org_id"], e.payload["source"], e.payload["external_id"])
        assert e.ordering_key == ref.ordering_key
        keys[ref.hub_id].add(e.ordering_key)
        topics[ref.hub_id].add(topic_of(e.type))
    assert all(len(k) == 1 for k in keys.values())
    assert sum(len(t) == 3 for t in topics.values()) > 50


def test_versions_strictly_increase_per_source_record(big: History) -> None:
    streams: dict[tuple[str, str], list[int]] = defaultdict(list)
    for e in big.distinct():
        topic = topic_of(e.type)
        if topic in (TOPIC_ACTIVITIES, TOPIC_INSIGHTS):
            streams[(e.ordering_key, topic)].append(e.version)
    for versions in streams.values():
        assert len(set(versions)) == len(versions)
    for e in big.distinct():
        assert e.occurred_at <= e.version


def test_by_topic_splits_arrival_order(big: History) -> None:
    parts = big.by_topic()
    assert sum(len(p) for p in parts.values()) == len(big.events)
    for topic, events in parts.items():
        assert events == [e for e in big.events if topic_of(e.type) == topic]


def test_history_exercises_every_convergence_scenario(big: History) -> None:
    acts = big.truth.activities.values()
    expected = expected_state(big.truth)
    types = Counter(e.type for e in big.distinct())
    assert all(
        types[t] > 0 for t in ("meeting.rescheduled", "meeting.updated", "email.updated", "sharing.changed")
    )
    cancelled = [t for t in acts if t.cancelled_at is not None]
    assert len(cancelled) > 10
    assert any(t.record for t in cancelled)  # re-created after a cancellation
    assert any(t.hub_id not in expected.hub_rows for t in cancelled)  # gone entirely
    assert any(not doc["has_record"] for doc, _ in expected.documents.values())  # insights without a record
    assert any(t.cancelled_at in t.insight_versions for t in cancelled)  # write-time tie with the tombstone
    assert any(v is None for t in acts for v, _ in t.insights.values())  # cleared insight cells
    ties = Counter((t.hub_id, g.fact.at) for t in acts for g in t.engagement)
    assert any(n > 1 for n in ties.values())  # engagement states logged in the same microsecond
    assert any(p != p.lower() for e in big.distinct() for p in e.payload.get("participants", []))
