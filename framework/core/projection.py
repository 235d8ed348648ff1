"""Projections: search documents built from the merged rows of one partition.

An app declares a projection with its index ``alias`` and ``mappings``, the
source ``tables`` it reads (all sharing one partition key) and ``build``,
which turns the live rows of one partition into a document. The framework
runs it in the stream (after every write to a source table), in backfills,
convergence checks, repairs and reindexes.

The document's version is not computed by ``build``: deletes leave no live
cell to read, so the live rows cannot tell how recent a partition is. Every
mutation of a source table also raises a per-partition mark in the
projection's version table (``<name>_version``: the partition key and one
``version`` cell written at the mutation's version, so the store keeps the
highest). A document is written at that mark: the highest version of any
write, delete or state log entry that ever touched its partition. The mark
never goes down, so a later projection of the same partition is never
older than an earlier one and ``external_gte`` accepts it. A partition
whose rows have no live cell (or whose ``build`` returns None) has no
document and is deleted at the mark. A view over the same source tables as
another may name it in ``marks_from`` and share its version table: their
marks are the same, so each writer writes them once (``mark_writers``).

A join's mutations mark their partitions at version 0 (``version_marks(...,
at=0)``, ``framework.state.join``): which partitions a join writes depends on
the order its entries arrived in (a re-mapping moves rows away from where an
earlier mapping put them), so a mark above 0 would leave a partition's
version depending on that order. Their rows change the document at the
version its other writers gave it, which ``external_gte`` accepts.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework.core.mutations import CellValue, Mutation, Upsert, check_identifier, checked_upsert
from framework.core.rows import Row
from framework.core.schema import Column, SchemaError, TableSchema

__all__ = ["Projection", "Document", "PartitionKey", "mark_writers"]

#: The partition key of a document's source rows, by column name.
PartitionKey = Mapping[str, CellValue]
#: ``(doc_id, document, version)``; ``document`` None means "no document: delete it".
Document = tuple[str, Mapping[str, Any] | None, int]

_VERSION_COLUMN = "version"


class Projection(abc.ABC):
    """A search projection an app declares; subclass and implement ``build``.

    ``name`` (an identifier) names its version table and change topic;
    ``alias`` is the index alias; ``tables`` are the source tables, which
    must share their partition key (checked when the class is first used).
    ``marks_from``: the name of another view of the app with the same source
    tables whose version table this one shares (``App`` checks it); its changes
    are announced on that view's change topic, and that view's projector projects
    it from the same read (``App.change_feeds``). Declare it with the view, or
    after a backfill: a view that stops sharing reads its own table, which missed
    the marks written meanwhile.
    """

    name: ClassVar[str]
    alias: ClassVar[str]
    tables: ClassVar[tuple[TableSchema, ...]]
    mappings: ClassVar[Mapping[str, Any]] = {}
    marks_from: ClassVar[str | None] = None

    @abc.abstractmethod
    def build(self, key: PartitionKey, rows: Mapping[str, Sequence[Row]]) -> Mapping[str, Any] | None:
        """The document of one partition from the live rows of each source table (by table
        name; a table without rows maps to an empty list), or None for no document.

        Pure: no I/O, no clock. Include only what the rows say, so any
        replay of the same writes builds the same document.
        """

    def document_id(self, key: PartitionKey) -> str:
        """The document id of a partition (default: its key values joined by ``:``)."""
        names = self.key_names
        if len(names) == 1:
            return str(key[names[0]])
        return ":".join(str(key[name]) for name in names)

    # -- derived, framework side (computed once per instance) -----------------
    @functools.cached_property
    def partition_key(self) -> tuple[Column, ...]:
        """The partition key every source table shares; SchemaError when they differ."""
        tables = tuple(self.tables)
        check_identifier(self.name, "projection")
        if not tables:
            raise SchemaError("tables", f"projection {self.name}: declares no source table")
        first = tables[0].partition_key
        for t in tables[1:]:
            if t.partition_key != first:
                raise SchemaError(
                    "tables",
                    f"projection {self.name}: {t.name} is partitioned by "
                    f"{[c.name for c in t.partition_key]}, {tables[0].name} by {[c.name for c in first]}",
                )
        return first

    @functools.cached_property
    def key_names(self) -> tuple[str, ...]:
        """The names of the partition key's columns, in order."""
        return tuple(c.name for c in self.partition_key)

    @functools.cached_property
    def source_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tables)

    @functools.cached_property
    def version_table(self) -> TableSchema:
        """``<name>_version`` (of ``marks_from`` when set): the partition key and the partition's
        highest write version."""
        return TableSchema(
            name=f"{self.marks_from or self.name}_version",
            partition_key=self.partition_key,
            columns=(Column(_VERSION_COLUMN, "bigint"),),
        )

    def key_of(self, mutation: Mutation) -> PartitionKey | None:
        """The partition ``mutation`` changes, or None when it is not a source table's."""
        if mutation.table not in self.source_names:
            return None
        key = mutation.key
        try:
            return {name: key[name] for name in self.key_names}
        except KeyError as exc:
            raise SchemaError("key", f"{mutation.table}: partition key column {exc} missing") from None

    def touched(self, mutations: Iterable[Mutation]) -> dict[str, tuple[PartitionKey, int]]:
        """Partitions ``mutations`` change, by document id, with the highest version of each."""
        out: dict[str, tuple[PartitionKey, int]] = {}
        for m in mutations:
            key = self.key_of(m)
            if key is None:
                continue
            doc_id = self.document_id(key)
            seen = out.get(doc_id)
            if seen is None or m.version > seen[1]:
                out[doc_id] = (key, m.version)
        return out

    def version_marks(self, mutations: Iterable[Mutation], at: int | None = None) -> list[Upsert]:
        """One version-table write per partition ``mutations`` change, at its highest version,
        or at ``at`` for all of them (a join's, 0: the partition has a mark, not raised)."""
        name = self.version_table.name
        marks = [(key, version if at is None else at) for key, version in self.touched(mutations).values()]
        return [checked_upsert(name, key, {_VERSION_COLUMN: v}, v) for key, v in marks]

    def document(self, key: PartitionKey, rows: Mapping[str, Sequence[Row]], mark: Row | None) -> Document:
        """The document of a partition at its version: the mark when there is one (a join's
        cells, written above it, do not count), else, for partitions written before marks
        existed, the highest live cell; ``None`` document when there is none."""
        complete = {t.name: list(rows.get(t.name, ())) for t in self.tables}
        live = [r for rs in complete.values() for r in rs if r.cells]
        if mark is not None and (cell := mark.cells.get(_VERSION_COLUMN)) is not None:
            version = cell.writetime
        else:
            version = max((r.version for r in live), default=0)
        doc = self.build(key, complete) if live else None
        return self.document_id(key), doc, version


def mark_writers(views: Iterable[Projection]) -> list[Projection]:
    """The first of ``views`` of each version table: the views whose marks a writer writes
    (views sharing a version table have the same source tables, so the same marks)."""
    first: dict[str, Projection] = {}
    for v in views:
        first.setdefault(v.version_table.name, v)
    return list(first.values())
