"""``map_event``: one event through an agent's pure mapping, as the stream and the backfill run it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framework.core.events import Event
from framework.core.mutations import Delete, LogState, Mutation, Upsert
from framework.core.projection import Projection, mark_writers
from framework.runtime.agent import KeyedAgent
from framework.runtime.errors import MessageError

__all__ = ["map_event"]

_MUTATIONS = (Upsert, Delete, LogState)
#: ``screen(event, mutations)``: the mutations without an erased subject's writes
#: (``framework.erasure.SubjectScreen``); pure given its deny-list snapshot.
Screen = Callable[[Event, list[Mutation]], list[Mutation]]


def map_event(
    agent: KeyedAgent,
    event: Event,
    projections: Sequence[Projection] = (),
    screen: Screen | None = None,
    resolve: Screen | None = None,
) -> list[Mutation]:
    """The agent's mutations for ``event`` (through ``resolve`` when given: owner ids rewritten to
    their final ids, ``framework.idmutation.IdResolution``; then through ``screen``: erased
    subjects' writes removed), then the version marks of ``projections`` they touch.

    Anything ``handle`` raises, and anything it returns that is not a
    mutation, makes the event a bad message: ``MessageError`` at stage
    ``map``, which the stream parks and the backfill parks too. ``handle`` is
    pure, so a retry would fail the same way.
    """
    try:
        mutations = list(agent.handle(event))
        for m in mutations:
            if not isinstance(m, _MUTATIONS):
                raise TypeError(f"{agent.name}.handle returned {type(m).__name__}, not a mutation")
        if resolve is not None:
            mutations = resolve(event, mutations)
        if screen is not None:
            mutations = screen(event, mutations)
        marks = [mark for p in mark_writers(projections) for mark in p.version_marks(mutations)]
    except Exception as exc:  # noqa: BLE001 - any failure of a pure mapping is the message's
        raise MessageError("map", exc) from exc
    return mutations + marks
