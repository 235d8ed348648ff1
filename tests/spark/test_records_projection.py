"""Row records (the Parquet export) projected in Arrow batches give what the projection gives row by row.

An app declared here has a blob partition key, a clustering table and blob
and double cells, so the batch decoder meets every kind of value; the
partitions' records are split across batches of every small size, and the
Spark path (``expected_from_records``) ends in the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from framework import App, Column, Event, KeyedAgent, Projection, Row, TableSchema
from framework.core.cells import Cell
from framework.core.mutations import Mutation
from spark_batch.codec import digest, record_to_row, row_to_record, rows_from_records
from spark_batch.convergence import check, expected_from_records
from spark_batch.io import DOC_SCHEMA, ROW_SCHEMA
from spark_batch.projection import records_expected_task
from spark_batch.records import cells_decoder, decode, direct_cells

SPEC = "tests.spark.test_records_projection:app"
ROW_ARROW = pa.schema([pa.field(n, pa.string()) for n in ("table", "pk", "key", "cells")])
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


class ShiftedProjection(FileProjection):
    """Overrides ``document`` (one version above the framework's), so the task must call it."""

    def document(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]], mark: Row | None) -> Any:
        doc_id, doc, version = super().document(key, rows, mark)
        return doc_id, doc, version + 1


PROJECTION = FileProjection()
app = App("records-projection", agents=[FileAgent()], projections=[PROJECTION])
SHIFTED = ShiftedProjection()
shifted_app = App("records-projection-shifted", agents=[FileAgent()], projections=[SHIFTED])


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


def _want(
    parts: list[tuple[bytes, dict[str, list[Row]], Row | None]], projection: Projection = PROJECTION
) -> set[tuple[Any, ...]]:
    """The expected records, projected one partition at a time from the rows themselves."""
    out = set()
    for owner, rows, mark in parts:
        if not any(rows.values()) and mark is None:
            continue
        doc_id, doc, version = projection.document({"owner": owner}, rows, mark)
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


def test_check_counts_empty_and_one_sided_inputs(spark: SparkSession, tmp_path: Path) -> None:
    """The totals are observed while only the divergent documents are cached: no rows on either
    side is a clean check of nothing; an index without a store is every document orphaned."""
    rows, none, docs = (str(tmp_path / name) for name in ("rows", "none", "docs"))
    spark.createDataFrame([], ROW_SCHEMA).write.parquet(rows)
    spark.createDataFrame([], DOC_SCHEMA).write.parquet(none)
    spark.createDataFrame([("b", 2, "{}"), ("a", 1, "{}")], DOC_SCHEMA).write.parquet(docs)
    empty = check(spark, app=SPEC, store_parquet=rows, index_parquet=none)
    empty.release()
    assert empty.report.clean and empty.report.expected_docs == empty.report.index_docs == 0
    orphans = check(spark, app=SPEC, store_parquet=rows, index_parquet=docs)
    assert orphans.divergent.count() == 2
    orphans.release()
    assert orphans.report.counts == {"missing": 0, "stale": 0, "orphaned": 2, "content": 0, "ahead": 0}
    assert orphans.report.samples["orphaned"] == ["a", "b"]
    assert (orphans.report.expected_docs, orphans.report.index_docs) == (0, 2)


_VALUES = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["$b64", '{"$b64":"AA=="}', "é\u2028\x00"]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.binary(max_size=6),
    st.none(),
)
_WRITETIMES = st.integers(min_value=-(2**62), max_value=2**62)
_CELLS = st.dictionaries(
    st.sampled_from(["name", "body", "size", "weight"]), st.builds(Cell, _VALUES, _WRITETIMES)
)
_KEYS = st.fixed_dictionaries({"owner": st.binary(max_size=4)}, optional={"tag": st.text(max_size=4)})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(Row, _KEYS, _CELLS), max_size=12))
def test_decode_gives_the_rows_and_their_highest_write_times(rows: list[Row]) -> None:
    records = [row_to_record(TAGS, r) for r in rows]
    keys, cells = [r[2] for r in records], [r[3] for r in records]
    got, tops = decode(keys, cells)
    assert got == rows == [record_to_row(k, c) for k, c in zip(keys, cells, strict=True)]
    assert all(type(c) is Cell and c.expires_at is None for r in got for c in r.cells.values())
    assert tops == [max((c.writetime for c in r.cells.values()), default=0) for r in rows]


def test_cells_made_directly_equal_cells_made_by_the_class() -> None:
    assert direct_cells  # Cell is a slots dataclass without __post_init__
    text = '[{"a":["x",5],"b":[{"$b64":"AAE="},7]},{},{"a":[1.5,-3],"a":[2,-9]}]'
    made = {}
    for direct in (True, False):
        decoder, tops = cells_decoder(True, direct)
        made[direct] = decoder.decode(text)
        assert tops == [7, 0, -9]
    assert (
        made[True] == made[False] == [{"a": Cell("x", 5), "b": Cell(b"\x00\x01", 7)}, {}, {"a": Cell(2, -9)}]
    )
    assert [hash(c) for c in made[True][0].values()] == [hash(Cell("x", 5)), hash(Cell(b"\x00\x01", 7))]
    assert repr(made[True][0]["a"]) == repr(Cell("x", 5))


def test_decode_refuses_a_text_that_is_not_one_object() -> None:
    with pytest.raises(ValueError):
        decode(['{"a":1},{"b":2}'], ['{"x":["v",1]}'])
    with pytest.raises(ValueError):
        decode(['{"a":1}'], ['{"x":["v",1]},{}'])
    assert decode([], []) == ([], [])


_ROW_CELLS = {
    "name": st.one_of(st.text(max_size=5), st.none()),
    "body": st.binary(max_size=4),
    "size": st.floats(allow_nan=False, allow_infinity=False),
}


@st.composite
def _partition_rows(draw: st.DrawFn, owner: bytes) -> tuple[bytes, dict[str, list[Row]], Row | None]:
    """One partition: a file row (maybe without live cells), tag rows (some empty), maybe a mark."""
    key = {"owner": owner}
    files = []
    if draw(st.booleans()):
        names = draw(st.sets(st.sampled_from(sorted(_ROW_CELLS))))
        files.append(Row(key, {n: Cell(draw(_ROW_CELLS[n]), draw(_WRITETIMES)) for n in sorted(names)}))
    tags = []
    for tag in draw(st.sets(st.sampled_from(["a", "b", "c"]))):
        cells = {"weight": Cell(draw(st.integers(-5, 5)), draw(_WRITETIMES))} if draw(st.booleans()) else {}
        tags.append(Row({**key, "tag": tag}, cells))
    mark = None
    if draw(st.booleans()):
        mark = Row(key, {"version": Cell(0, draw(_WRITETIMES))} if draw(st.booleans()) else {})
    return owner, {FILES.name: files, TAGS.name: tags}, mark


@st.composite
def _parts(draw: st.DrawFn) -> list[tuple[bytes, dict[str, list[Row]], Row | None]]:
    owners = draw(st.lists(st.binary(min_size=1, max_size=3), unique=True, max_size=12))
    return [draw(_partition_rows(o)) for o in owners]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_parts(), st.integers(min_value=1, max_value=9), st.booleans())
def test_batches_of_random_partitions_give_what_document_gives(
    parts: list[tuple[bytes, dict[str, list[Row]], Row | None]], size: int, shifted: bool
) -> None:
    """Any rows, marks, write times (negative ones too) and batch cuts: the task's records are the
    projection's ``document`` of each partition, also when the app overrides ``document``."""
    projection, spec = (SHIFTED, SPEC.replace(":app", ":shifted_app")) if shifted else (PROJECTION, SPEC)
    records = sorted((r for r in _records(parts) if r[0] != OTHER.name), key=lambda r: r[1])
    table = pa.Table.from_pylist([dict(zip(ROW_SCHEMA.names, r, strict=True)) for r in records], ROW_ARROW)
    got = [
        tuple(x.values())
        for b in records_expected_task(spec, "files", iter(table.to_batches(max_chunksize=size)))
        for x in b.to_pylist()
    ]
    assert len(got) == len(set(got))
    assert set(got) == _want(parts, projection)
