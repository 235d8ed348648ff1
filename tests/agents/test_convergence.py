"""The key claim: any arrival order, duplicates and replays converge, for the reference app.

Every run goes through the test kit's Driver (the worker's parse, route, map
with version marks, store, change feed and projector steps, on SQLite
``:memory:`` and the kit's in-memory index). Two independent references:
the in-order pass of the same history (``assert_converges``) and the oracle,
computed from the generator's ground truth (what the sources hold), never by
running the mappings through a store.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import ActivitiesAgent, ActivityProjection, EngagementAgent, InsightsAgent
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import compare_rows, expected_state, row_cells
from framework import App, Event, Upsert
from framework.core.mutations import Mutation
from framework.testing import assert_converges, deliveries, run_history
from tests.agents.replay import app, divergences, in_order, oracle_divergences


@pytest.fixture(scope="module")
def big() -> History:
    return generate_history(seed=2024, n_events=1500, n_orgs=8)


def test_the_generators_arrival_order_converges_to_the_oracle(big: History) -> None:
    assert oracle_divergences(big) == []


def test_the_clean_in_order_pass_converges_to_the_oracle(big: History) -> None:
    assert oracle_divergences(big, in_order(big)) == []


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_topics_consumed_one_after_another_converge(order: tuple[int, ...]) -> None:
    h = generate_history(seed=99, n_events=500, n_orgs=6)
    parts = sorted(h.by_topic().items())
    assert oracle_divergences(h, [e for i in order for e in parts[i][1]]) == []


@pytest.mark.slow
# Each example: a small generated history (duplicates, replays and disorder of its own), one
# delivery order drawn from its in-order pass (shuffled, duplicated, a replayed tail), compared
# with the in-order pass and with the oracle; ~30 ms each, so 300 examples stay near 10 s.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 30),
    n_orgs=st.integers(1, 3),
    keep_key_order=st.booleans(),
    data=st.data(),
)
def test_every_delivery_converges_to_the_in_order_pass_and_the_oracle(
    seed: int, n: int, n_orgs: int, keep_key_order: bool, data: st.DataObject
) -> None:
    h = generate_history(seed, n, n_orgs=n_orgs)
    history = in_order(h)
    order = data.draw(deliveries(history, max_duplicates=4, keep_key_order=keep_key_order), label="delivery")
    delivered = assert_converges(app, history, order)
    assert divergences(expected_state(h.truth), delivered) == []


# -- the oracle is not fooled by broken mappings -------------------------------------------------
def _broken_app(rewrite: type[ActivitiesAgent]) -> App:
    return App(
        "broken", agents=[rewrite(), EngagementAgent(), InsightsAgent()], projections=[ActivityProjection()]
    )


def _value_divergences(h: History, broken: App, events: Iterable[Event]) -> int:
    """Divergent hub cells by value only (write times ignored)."""
    snap = run_history(broken, list(events))
    actual = {str(k[0]): row_cells(r) for k, r in snap.tables["activity_hub"].items()}
    return len(compare_rows("activity_hub", expected_state(h.truth).hub_rows, actual, writetimes=False))


class DropsCancellations(ActivitiesAgent):
    def handle(self, event: Event) -> Iterable[Mutation]:
        return [] if event.type == "meeting.cancelled" else super().handle(event)


class SoftCancel(ActivitiesAgent):
    def handle(self, event: Event) -> Iterable[Mutation]:
        if event.type != "meeting.cancelled":
            return super().handle(event)
        [d] = super().handle(event)
        return [Upsert(d.table, d.key, {"status": "cancelled"}, d.version)]


class ProcessingClock(ActivitiesAgent):
    clock = itertools.count(1)

    def handle(self, event: Event) -> Iterable[Mutation]:
        return [dataclasses.replace(m, version=next(self.clock)) for m in super().handle(event)]


def test_the_oracle_detects_a_lost_cancellation(big: History) -> None:
    assert _value_divergences(big, _broken_app(DropsCancellations), big.events) > 0


def test_the_oracle_detects_cancellation_as_a_status_update(big: History) -> None:
    assert _value_divergences(big, _broken_app(SoftCancel), big.events) > 0


def test_the_oracle_and_the_kit_detect_processing_clock_versions(big: History) -> None:
    events = list(big.events)
    random.Random(1).shuffle(events)
    assert _value_divergences(big, _broken_app(ProcessingClock), events) > 0
    small = in_order(generate_history(5, 40, n_orgs=2))
    with pytest.raises(AssertionError, match="does not converge to the in-order pass"):
        assert_converges(_broken_app(ProcessingClock), small, list(reversed(small)))
