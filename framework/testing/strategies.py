"""Hypothesis strategies for delivery orders: what Kafka, producers and consumers may do to a history.

A delivery of an in-order history is a reordering of it (any order by
default: the convergence model says every order converges; or keeping each
ordering key's order, as one Kafka partition does), with some messages
delivered again (producer retries, duplicates) and a tail of the delivery
replayed (a consumer restarting from its last commit). Every event of the
history is delivered at least once. Draws shrink towards the history itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from framework.core.events import Event
from framework.core.extras import needs_extra

with needs_extra("framework.testing's Hypothesis support"):
    from hypothesis import strategies as st

__all__ = ["deliveries", "in_key_order"]

E = TypeVar("E", bound=Event | bytes | str)


def in_key_order(history: Sequence[E], order: Sequence[int]) -> list[E]:
    """The events of ``history`` in the slots ``order`` gives, but each ordering key's events in
    their history order (a raw message counts as its own key)."""
    by_key: dict[object, list[E]] = {}
    for e in history:
        by_key.setdefault(_key(e), []).append(e)
    queues = {k: iter(v) for k, v in by_key.items()}
    return [next(queues[_key(history[i])]) for i in order]


def _key(e: Event | bytes | str) -> object:
    return e.ordering_key if isinstance(e, Event) else e


@st.composite
def _delivery(
    draw: st.DrawFn, history: Sequence[E], max_duplicates: int, replay: bool, key_order: bool
) -> list[E]:
    n = len(history)
    if n == 0:
        return []
    order = draw(st.permutations(range(n)))
    delivered = in_key_order(history, order) if key_order else [history[i] for i in order]
    copies = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n)), max_size=max_duplicates))
    for i, at in copies:  # a duplicate of event i at position at (clamped to the growing list)
        delivered.insert(min(at, len(delivered)), history[i])
    if replay:
        replayed = draw(st.integers(0, len(delivered)))  # how many of the last deliveries come again
        delivered += delivered[len(delivered) - replayed :]
    return delivered


def deliveries(
    history: Sequence[E],
    *,
    max_duplicates: int = 3,
    replay: bool = True,
    keep_key_order: bool = False,
) -> st.SearchStrategy[list[E]]:
    """Delivery orders of the in-order ``history``: shuffled (fully, or keeping each ordering
    key's order with ``keep_key_order``), with up to ``max_duplicates`` extra copies of
    events inserted anywhere and, with ``replay``, a replayed tail of the delivery."""
    if max_duplicates < 0:
        raise ValueError("max_duplicates must not be negative")
    return _delivery(list(history), max_duplicates, replay, keep_key_order)
