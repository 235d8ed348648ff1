"""Convergence properties on the real SQLite store (a fresh ``:memory:`` store per example)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings

from stores.base import WideColumnStore
from stores.sqlite.store import SqliteStore
from tests.stores.convergence import Case, cases, check_current_state, check_history
from tests.stores.harness import ManualClock


async def memory_store(clock: ManualClock) -> WideColumnStore:
    return SqliteStore(":memory:", clock=clock, page_size=2)


@settings(max_examples=500, deadline=None)
@given(case=cases())
def test_any_delivery_of_a_history_converges_to_the_oracle(case: Case) -> None:
    asyncio.run(check_history(memory_store, case))


@settings(max_examples=500, deadline=None)
@given(case=cases(hub=False))
def test_current_state_of_a_shuffled_log_matches_the_oracle(case: Case) -> None:
    asyncio.run(check_current_state(memory_store, case))


@settings(max_examples=500, deadline=None)
@given(case=cases(log=False, hub_keys=1))
def test_any_delivery_of_one_row_history_converges_to_the_oracle(case: Case) -> None:
    """All writes on one row: ties, tombstones and batch splits collide as often as possible."""
    asyncio.run(check_history(memory_store, case))
