"""The key claim: any arrival order, duplicates, replays and batching converge to the oracle's state.

The oracle is computed from the generator's ground truth (what the sources
hold), never by running the mappings through a store; the store is the real
embedded engine (``SqliteEngine(":memory:")``).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import compare_rows, expected_state, row_cells
from framework.core.events import Event
from framework.core.mutations import Upsert
from tests.agents.replay import apply_all, divergences, fresh_store, mutations


@pytest.fixture(scope="module")
def big() -> History:
    return generate_history(seed=2024, n_events=3000, n_orgs=10)


def test_arrival_order_converges(big: History) -> None:
    store = fresh_store()
    apply_all(store, ([e] for e in big.events))
    assert divergences(expected_state(big.truth), store) == []


def test_clean_in_order_pass_converges_to_the_same_state(big: History) -> None:
    store = fresh_store()
    apply_all(store, ([e] for e in sorted(big.distinct(), key=lambda e: e.version)))
    assert divergences(expected_state(big.truth), store) == []


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_topics_consumed_one_after_another_converge(big: History, order: tuple[int, ...]) -> None:
    parts = sorted(big.by_topic().items())
    store = fresh_store()
    for i in order:
        apply_all(store, [parts[i][1]])  # one whole topic in one batch, then the next
    assert divergences(expected_state(big.truth), store) == []


# Each example generates a history, applies ~170 events through all three agents into a fresh
# SQLite store and compares four views, so 200 examples already cover 200 seeds x orders.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(20, 160),
    order_seed=st.integers(0, 2**32),
    batch=st.integers(1, 16),
    extra_dup=st.floats(0.0, 0.3),
)
def test_any_permutation_batching_and_duplication_converges(
    seed: int, n: int, order_seed: int, batch: int, extra_dup: float
) -> None:
    h = generate_history(seed, n, n_orgs=3)
    rng = random.Random(order_seed)
    events = list(h.events) + [e for e in h.events if rng.random() < extra_dup]
    rng.shuffle(events)
    store = fresh_store()
    apply_all(store, (events[i : i + batch] for i in range(0, len(events), batch)))
    assert divergences(expected_state(h.truth), store) == []


def _value_divergences(h: History, events: list[Event], map_event: Callable[[Event], list]) -> int:
    """Divergent hub cells by value only (write times ignored), under a broken mapping."""
    store = fresh_store()
    for e in events:
        store.apply(map_event(e))
    actual = {str(r.key["hub_id"]): row_cells(r) for r in store.scan("activity_hub")}
    return len(compare_rows("activity_hub", expected_state(h.truth).hub_rows, actual, writetimes=False))


def test_oracle_detects_a_lost_cancellation(big: History) -> None:
    events = [e for e in big.events if e.type != "meeting.cancelled"]
    assert _value_divergences(big, events, mutations) > 0


def test_oracle_detects_processing_clock_versions(big: History) -> None:
    events = list(big.events)
    random.Random(1).shuffle(events)
    clock = itertools.count(1)

    def stamped(e: Event) -> list:
        return [dataclasses.replace(m, version=next(clock)) for m in mutations(e)]

    assert _value_divergences(big, events, stamped) > 0


def test_oracle_detects_cancellation_as_a_status_update(big: History) -> None:
    def soft_cancel(e: Event) -> list:
        if e.type != "meeting.cancelled":
            return mutations(e)
        [d] = mutations(e)
        return [Upsert(d.table, d.key, {"status": "cancelled"}, d.version)]

    assert _value_divergences(big, list(big.events), soft_cancel) > 0
