"""Stamping notification entries: an entry carries the time its write *ended*, within ``late_after``.

A reader passes an ingestion time once it is ``settle`` seconds old, so an entry
must be visible by then. Writers therefore stamp entries when they write them
(never with an earlier time, such as the start of a batch they redo), and
``write_stamped`` checks the write afterwards: when it ended more than
``late_after`` seconds (the writer's clock) after the stamp, the entries are
written again at a fresh stamp, until one write lands in time. The entry that
landed in time is visible before any reader whose clock is at most
``settle - late_after`` seconds ahead of the writer's reaches its stamp; the
late copy is a duplicate (consumers see its keys twice, as after any redo).
Cost: one clock read per write; a second write of the entries (not of the
data) only after a write slower than ``late_after``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from framework.core.mutations import Mutation

__all__ = ["write_stamped", "micros"]


def micros(seconds: float) -> int:
    """Epoch seconds as integer microseconds (an ingestion time)."""
    return int(round(seconds * 1_000_000))


async def write_stamped(
    apply: Callable[[Sequence[Mutation]], Awaitable[None]],
    notes: Callable[[int], Sequence[Mutation]],
    clock: Callable[[], float],
    late_after: float,
    data: Sequence[Mutation] = (),
) -> int:
    """Apply ``data`` with ``notes(now)`` (the entries stamped now, in microseconds) in one
    ``apply``; while an apply ended more than ``late_after`` seconds after its stamp, apply
    ``notes(now)`` again (without ``data``). The stamp of the write that landed in time (or of
    the only write, when ``notes`` gives no entries: nothing to write again)."""
    first = list(data)
    while True:
        at = micros(clock())
        entries = list(notes(at))
        await apply([*first, *entries])
        if not entries or micros(clock()) - at <= micros(late_after):
            return at
        first = []
