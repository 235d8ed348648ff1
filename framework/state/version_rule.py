"""The write version of a joined mapping: one rule for the stream, the test driver and the backfill.

An event of version ``e`` mapped with entries of versions ``v1..vn`` and
ranks ``r1..rn`` (``Entry.rank``, 0-255) is written at

    w = M + 256 * spread(y) + r1 + ... + rn,   M = max(e, v1, ..., vn),
    y = (v1 - e) + ... + (vn - e)

(``w = e`` when it read no entry; kept within ``0..MAX_VERSION``), where
``spread`` is ``y + 4096`` for ``|y| <= 4096`` and continues with slope
``2**-20`` beyond (floored, never decreasing). ``M`` keeps the primary part
on the time axis; ``y`` rises with every entry version, also one below ``M``
or below ``e``; the ranks order two values of one version as
``lookup.merge`` does. So a re-mapping with newer entries (same keys read)
outranks the earlier mapping, and its cells and moved-row tombstones shadow
the earlier ones, whenever

- only values changed at equal versions and some rank rose (equal ranks tie:
  1 pair in 256), or
- both sums ``y`` lie within +-4096 us, or ``y`` rose by at least ``2**20`` us
  per entry whose version rose, or ``M`` by at least 256 us per such entry.

Outside these (a change of less than ~1 s of a version far from the event,
whose rank drops) the two mappings may tie or invert: no rule can rank
arbitrarily many changes below ``M`` in one timestamp that stays near ``M``.
``w`` stays within ``2**21 + 255 n`` us plus ``|y| / 4096`` of ``M``. Limits
are in docs/how-to/lookups-and-joins.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from framework.core.events import Event
from framework.core.lookup import Entry
from framework.core.mutations import MAX_VERSION
from framework.state.view import StateView

__all__ = ["join_version", "write_version", "spread", "RANK_SPAN", "FINE", "COARSE"]

#: ``join_version``'s constants: the rank span, the exact window of ``y`` (us), its coarse step.
RANK_SPAN, FINE, COARSE = 256, 4096, 1 << 20


def spread(y: int) -> int:
    """``y + FINE`` on ``[-FINE, FINE]``, one step per ``COARSE`` beyond; never negative inside
    the window, never decreasing."""
    if y > FINE:
        return 2 * FINE + (y - FINE) // COARSE
    if y < -FINE:
        return (y + FINE) // COARSE
    return y + FINE


def join_version(event_version: int, entries: Iterable[Entry]) -> int:
    """The write version of an event of ``event_version`` mapped with ``entries`` (the module
    docstring's rule)."""
    found = list(entries)
    if not found:
        return event_version
    top = max(event_version, *(e.version for e in found))
    y = sum(e.version - event_version for e in found)
    return min(MAX_VERSION, max(0, top + RANK_SPAN * spread(y) + sum(e.rank for e in found)))


def write_version(event: Event, view: StateView) -> int:
    """The version an event's mutations are written at: ``join_version`` of the event and of
    every entry it read."""
    return join_version(event.version, view.found.values())
