"""Row records (the Parquet export) projected in Arrow batches give what the projection gives row by row.

An app declared here has a blob partition key, a clustering table and blob
and double cells, so the batch decoder meets every kind of value; the
partitions' records are split across batches of every small size, and the
Spark path (``expected_from_records``) ends in the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from framework import App, Column, Event, KeyedAgent, Projection, Row, TableSchema
from framework.core.cells import Cell
from framework.core.mutations import Mutation
from spark_batch.codec import digest, record_to_row, row_to_record, rows_from_records
from spark_batch.convergence import expected_from_records
from spark_batch.io import ROW_SCHEMA
from spark_batch.projection import records_expected_task

SPEC = "tests.spark.test_records_projection:app"
KEY = (Column("owner", "blob"),)
FILES = TableSchema("files", KEY, (Column("name", "text"), Column("body", "blob"), Column("size", "double")))
TAGS = TableSchema("file_tags", KEY, (Column("weight", "int"),), clustering_key=(Column("tag", "text"),))
OTHER = TableSchema("unrelated", KEY, (Column("x", "int"),))


class FileProjection(Projection):
    """One document per owner: the file's cells (blobs as hex) and its tags by weight."""

    name: ClassVar[str] = "files"
    alias: ClassVar[str] = "files"
    tables: ClassVar[tuple[TableSchema, ...]] = (FILES, TAGS)

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        files = rows[FILES.name]
        if not files and not rows[TAGS.name]:
            return None
        doc: dict[str, Any] = {"owner": key["owner"].hex()}
        for name, cell in files[0].cells.items() if files else ():
            doc[name] = cell.value.hex() if isinstance(cell.value, bytes) else cell.value
        doc["tags"] = sorted((r.key["tag"], r.cells["weight"].value) for r in rows[TAGS.name] if r.cells)
        return doc

    def document_id(self, key: Mapping[str, Any]) -> str:
        return key["owner"].hex()


class FileAgent(KeyedAgent):
    """Declares the tables; the check never runs an agent."""

    name: ClassVar[str] = "files"
    topic: ClassVar[str] = "file-events"
    tables: ClassVar[tuple[TableSchema, ...]] = (FILES, TAGS, OTHER)

    def handle(self, event: Event) -> Iterable[Mutation]:
        return []


PROJECTION = FileProjection()
app = App("records-projection", agents=[FileAgent()], projections=[PROJECTION])


def _partitions(n: int) -> list[tuple[bytes, dict[str, list[Row]], Row | None]]:
    """``n`` partitions with every shape: file only, tags only, both, mark only, blob and unicode cells."""
    out = []
    for i in range(n):
        owner = bytes([i % 256, 0, 255]) + f"{i}".encode()
        key = {"owner": owner}
        files: list[Row] = []
        tags: list[Row] = []
        if i % 4 != 1:
            cells = {"name": Cell(f"fichier-{i}-é", 10 + i), "size": Cell(i / 3, 11 + i)}
            if i % 3 == 0:
                cells["body"] = Cell(bytes(range(i % 7, i % 7 + 5)), 12 + i)
            files.append(Row(key, cells))
        if i % 4 != 2:
            tags = [
                Row({**key, "tag": f"t{j}"}, {"weight": Cell(j * i, 20 + i + j)}) for j in range(i % 3 + 1)
            ]
        mark = Row(key, {"version": Cell(100 + i, 100 + i)}) if i % 5 else None
        if i % 4 == 3:
            files, tags = [], []  # only the version mark is left
            mark = mark or Row(key, {"version": Cell(100 + i, 100 + i)})
        out.append((owner, {FILES.name: files, TAGS.name: tags}, mark))
    return out


def _records(parts: list[tuple[bytes, dict[str, list[Row]], Row | None]]) -> list[tuple[str, str, str, str]]:
    records = []
    for owner, rows, mark in parts:
        for schema in (FILES, TAGS):
            records += [row_to_record(schema, r) for r in rows[schema.name]]
        if mark is not None:
            records.append(row_to_record(PROJECTION.version_table, mark))
        records.append(row_to_record(OTHER, Row({"owner": owner}, {"x": Cell(1, 1)})))
    return records


def _want(parts: list[tuple[bytes, dict[str, list[Row]], Row | None]]) -> set[tuple[Any, ...]]:
    """The expected records, projected one partition at a time from the rows themselves."""
    out = set()
    for owner, rows, mark in parts:
        if not any(rows.values()) and mark is None:
            continue
        doc_id, doc, version = PROJECTION.document({"owner": owner}, rows, mark)
        pk = row_to_record(FILES, Row({"owner": owner}, {}))[1]
        out.add((doc_id, pk, version, None if doc is None else digest(doc)))
    return out


def test_rows_from_records_decodes_as_record_to_row_does() -> None:
    records = _records(_partitions(40))
    keys, cells = [r[2] for r in records], [r[3] for r in records]
    assert rows_from_records(keys, cells) == [record_to_row(k, c) for k, c in zip(keys, cells, strict=True)]
    assert rows_from_records([], []) == []
    with pytest.raises(ValueError):
        rows_from_records(['{"a":1},{"b":2}'], ['{"x":["v",1]}'])


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_partitions_split_across_batches_project_once_each(size: int) -> None:
    parts = _partitions(60)
    records = sorted((r for r in _records(parts) if r[0] != OTHER.name), key=lambda r: r[1])
    table = pa.Table.from_pylist([dict(zip(ROW_SCHEMA.names, r, strict=True)) for r in records])
    batches = table.to_batches(max_chunksize=size)
    got = [
        tuple(x.values()) for b in records_expected_task(SPEC, "files", iter(batches)) for x in b.to_pylist()
    ]
    assert len(got) == len(set(got))
    assert set(got) == _want(parts)
    assert list(records_expected_task(SPEC, "files", iter([]))) == []


def test_expected_from_records_on_spark(spark: SparkSession) -> None:
    parts = _partitions(300)
    rows = spark.createDataFrame(_records(parts), ROW_SCHEMA)
    got = expected_from_records(spark, SPEC, "files", rows, 3).collect()
    assert {tuple(r) for r in got} == _want(parts)
    assert len(got) == len(_want(parts))
