"""A row as the stores return it: key columns and live cells with their write times."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter

from framework.core.cells import Cell
from framework.core.mutations import CellValue

__all__ = ["Row", "cell_int"]

_WRITETIME: Callable[[Cell], int] = attrgetter("writetime")


@dataclass(frozen=True, init=False)
class Row:
    """A row as read: its key columns and its live cells with their write times."""

    key: Mapping[str, CellValue]
    cells: Mapping[str, Cell]

    def __init__(self, key: Mapping[str, CellValue], cells: Mapping[str, Cell]) -> None:
        # Set in the instance dict directly: cheaper than the frozen dataclass's object.__setattr__.
        fields = self.__dict__
        fields["key"] = key
        fields["cells"] = cells

    def values(self) -> dict[str, CellValue]:
        """Cell values by column name (live cells only)."""
        return {name: c.value for name, c in self.cells.items()}

    @property
    def version(self) -> int:
        """The highest write time among the live cells."""
        return max(map(_WRITETIME, self.cells.values()))

    def writetime(self, column: str) -> int | None:
        c = self.cells.get(column)
        return None if c is None else c.writetime


def cell_int(value: CellValue) -> int:
    """``int(value)`` of a key or cell value read back; TypeError for None (a missing value)."""
    if value is None:
        raise TypeError("an integer value is missing (None)")
    return int(value)
