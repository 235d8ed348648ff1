"""``StateView``: the read-only view of the lookups an agent's ``handle(event, state)`` receives."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from framework.core.errors import ConvergeError
from framework.core.lookup import Entry

__all__ = ["StateView", "Missing"]


class Missing(ConvergeError, LookupError):
    """The entry ``key`` of lookup ``lookup`` has not arrived: the event waits for it.

    ``handle`` lets it propagate; the runtime keeps the event pending (never
    drops it, never maps it without the entry) and maps it when the entry arrives."""

    def __init__(self, lookup: str, key: str) -> None:
        super().__init__(f"lookup {lookup}: no entry {key!r} yet")
        self.lookup = lookup
        self.key = key


class StateView:
    """The entries of an agent's lookups as they are when one event is mapped.

    ``get(lookup, key)`` returns the ``Entry`` (``value``, ``version``) or
    raises ``Missing``. Every key read is recorded in ``reads``
    (``{(lookup, key): version}``) and the entries found in ``found``, so the
    runtime knows which entries the mapping depends on. Nothing can be
    written through it.
    """

    __slots__ = ("_read", "_names", "reads", "found")

    def __init__(self, read: Callable[[str, str], Entry | None], names: frozenset[str]) -> None:
        self._read = read
        self._names = names
        self.reads: dict[tuple[str, str], int | None] = {}
        self.found: dict[tuple[str, str], Entry] = {}

    def get(self, lookup: str, key: str) -> Entry:
        """The entry ``key`` of ``lookup``; ``Missing`` when it has not arrived."""
        if lookup not in self._names:
            raise KeyError(f"lookup {lookup!r} is not declared by this agent ({sorted(self._names)})")
        entry = self._read(lookup, key)
        self.reads[(lookup, key)] = None if entry is None else entry.version
        if entry is None:
            raise Missing(lookup, key)
        self.found[(lookup, key)] = entry
        return entry

    def value(self, lookup: str, key: str) -> Mapping[str, Any]:
        """Shorthand for ``get(lookup, key).value``."""
        return self.get(lookup, key).value

    @property
    def version(self) -> int:
        """The highest version among the entries read so far (0 when none)."""
        return max((v for v in self.reads.values() if v is not None), default=0)
