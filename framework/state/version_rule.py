"""The write version of a joined mapping: one rule for the stream, the test driver and the backfill.

An event's first mapping is written at the event's own version ``e``, whatever
entries it read. The join book remembers the version each event was last
planned at (``last``); a later mapping of the same event is written at

- ``last`` again when it read the same entries (same versions and values): the
  same writes, so rewriting them is idempotent;
- ``max(e, last + 1)`` otherwise: strictly above every write it replaces, at
  any spacing of the entry versions (1 us or a month), ties and equal-version
  replacements included.

The backfill maps each event once with the final entries: at ``e``. So the
stream and the backfill store the same values; a joined cell's write time is
``e`` plus the number of re-mappings with changed entries the stream made of
that event (the kit and the checks compare joined cells by value).

Two events writing one cell are ordered by their versions as long as these lie
more than ``k`` us apart, ``k`` the number of such re-mappings of the older
one; docs/explanation/limits.md shows that no rule writing within a bounded
distance of ``e`` can do better.
"""

from __future__ import annotations

from framework.core.mutations import MAX_VERSION

__all__ = ["remap_version"]


def remap_version(event_version: int, last: int | None, same_reads: bool) -> int:
    """The version of a mapping of an event of ``event_version`` whose last planned mapping was at
    ``last`` (None: never mapped) and read the same entries (``same_reads``)."""
    if last is None:
        return event_version
    if same_reads:
        return last
    return min(MAX_VERSION, max(event_version, last + 1))
