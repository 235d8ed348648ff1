"""Comparing what a run stored with what an oracle expects: rows, documents, one difference at a time."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from framework.core.rows import Row
from stores.base import SearchHit

__all__ = ["CellState", "Divergence", "compare_rows", "compare_documents", "row_cells", "hit_document"]

#: A cell as compared: its value and its write time.
CellState: TypeAlias = tuple[Any, int]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Divergence:
    """One difference between expected and actual state; ``field`` None means the whole row or document."""

    table: str
    key: Hashable
    field: str | None
    expected: Any
    actual: Any

    def __str__(self) -> str:
        where = f"{self.table}[{self.key!r}]" + (f".{self.field}" if self.field else "")
        return f"{where}: expected {self.expected!r}, got {self.actual!r}"


def compare_rows(
    table: str,
    expected: Mapping[K, Mapping[str, CellState]],
    actual: Mapping[K, Mapping[str, CellState]],
    *,
    writetimes: bool = True,
) -> list[Divergence]:
    """Differences between expected and actual rows (key -> column -> (value, write time))."""
    out: list[Divergence] = []
    for key in sorted(set(expected) | set(actual), key=repr):
        exp, act = expected.get(key), actual.get(key)
        if exp is None or act is None:
            out.append(Divergence(table, key, None, exp, act))
            continue
        for column in sorted(set(exp) | set(act)):
            e: Any = exp.get(column)
            a: Any = act.get(column)
            if not writetimes:
                e, a = (None if e is None else e[0]), (None if a is None else a[0])
            if e != a:
                out.append(Divergence(table, key, column, e, a))
    return out


def compare_documents(
    expected: Mapping[str, tuple[Mapping[str, Any], int]],
    actual: Mapping[str, tuple[Mapping[str, Any], int | None]],
    *,
    versions: bool = True,
) -> list[Divergence]:
    """Differences between expected and actual index documents (doc_id -> (source, version))."""
    out: list[Divergence] = []
    for doc_id in sorted(set(expected) | set(actual)):
        exp, act = expected.get(doc_id), actual.get(doc_id)
        if exp is None or act is None:
            out.append(Divergence("index", doc_id, None, exp, act))
            continue
        for name in sorted(set(exp[0]) | set(act[0])):
            if exp[0].get(name) != act[0].get(name):
                out.append(Divergence("index", doc_id, name, exp[0].get(name), act[0].get(name)))
        if versions and exp[1] != act[1]:
            out.append(Divergence("index", doc_id, "_version", exp[1], act[1]))
    return out


def row_cells(row: Row) -> dict[str, CellState]:
    """A store row as compared: column -> (value, write time) of its live cells."""
    return {name: (cell.value, cell.writetime) for name, cell in row.cells.items() if cell.value is not None}


def hit_document(hit: SearchHit) -> tuple[dict[str, Any], int | None]:
    """An index hit as compared: (source, version)."""
    return dict(hit.source), hit.version
