"""Schema evolution, the rule every store applies when ``ensure_table`` meets an existing table.

A declaration may add regular columns to a table. It may not change the
partition key, the clustering key or its order, nor a column's type, and it
may not leave out a column the table has (columns are never dropped): each
of those raises ``SchemaError`` naming the table and the difference.
"""

from __future__ import annotations

from framework.core.schema import Column, SchemaError, TableSchema

__all__ = ["added_columns"]


def _names(columns: tuple[Column, ...]) -> list[str]:
    return [c.name for c in columns]


def added_columns(existing: TableSchema, declared: TableSchema) -> tuple[Column, ...]:
    """The regular columns ``declared`` adds to ``existing`` (in declared order); SchemaError when
    ``declared`` is not ``existing`` plus regular columns."""
    t = existing.name
    problems: list[str] = []
    if existing.partition_key != declared.partition_key:
        problems.append(
            f"the partition key is {_key(existing.partition_key)}, declared {_key(declared.partition_key)}"
        )
    if existing.clustering_key != declared.clustering_key:
        problems.append(
            f"the clustering key is {_key(existing.clustering_key)}, declared {_key(declared.clustering_key)}"
        )
    elif existing.clustering_key and existing.clustering_order != declared.clustering_order:
        problems.append(
            f"the clustering order is {existing.clustering_order}, declared {declared.clustering_order}"
        )
    have = {c.name: c for c in existing.columns}
    want = {c.name: c for c in declared.columns}
    for name, col in want.items():
        old = have.get(name)
        if old is not None and old.type != col.type:
            problems.append(f"column {name} is {old.type}, declared {col.type} (types never change)")
    dropped = [n for n in have if n not in want]
    if dropped:
        problems.append(f"the declaration lacks columns {dropped} (columns are never dropped: declare them)")
    if problems:
        raise SchemaError("schema", f"table {t} cannot change as declared: {'; '.join(problems)}")
    return tuple(c for c in declared.columns if c.name not in have)


def _key(columns: tuple[Column, ...]) -> str:
    return "(" + ", ".join(f"{c.name} {c.type}" for c in columns) + ")"
