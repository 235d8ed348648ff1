"""An app's projection, computed by the batch jobs from whole scan shards.

A document depends on one partition of the projection's source tables and
its version mark (``framework.Projection.document``). Every one of these
tables shares the partition key, so a scan shard (partition hash on SQLite,
token range on Cassandra) holds all rows of its partitions in every table:
each shard is projected on its own, without a shuffle. The rows of one
source table without a clustering key (one row per partition, usually the
largest) stream through; the other tables' rows of the shard are held while
it does.

A partition is reported with its document, or with None when it has rows
but no document (``build`` returned None, or only its version mark is
left): the check needs those to repair an orphaned document by its key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from framework.core.projection import Document, PartitionKey, Projection
from framework.core.rows import Row
from framework.core.schema import TableSchema
from spark_batch.apps import projection_of
from spark_batch.codec import digest, partition_json
from spark_batch.heap import few_collections
from spark_batch.io import iterate_async, pages
from spark_batch.records import decode
from stores.base import WideColumnStore
from stores.open import open_wide_store

__all__ = [
    "EXPECTED_ARROW",
    "Expected",
    "key_json",
    "shard_documents",
    "expected_task",
    "records_expected_task",
]

#: ``(doc_id, key, version, digest)``: ``key`` the partition key's JSON, ``digest`` None for no document.
Expected = tuple[str, str, int, str | None]
#: The Arrow schema of ``Expected`` records.
EXPECTED_ARROW = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("digest", pa.string(), nullable=True),
    ]
)


def key_json(projection: Projection, key: Mapping[str, Any]) -> str:
    """The canonical JSON of the partition-key part of ``key`` (a row key or a partition key)."""
    return partition_json(projection.tables[0], key)


def _partition(projection: Projection, row: Row) -> PartitionKey:
    return {c.name: row.key[c.name] for c in projection.partition_key}


def _streamed(projection: Projection) -> TableSchema | None:
    """The first source table with one row per partition, which can stream; None when there is none."""
    return next((t for t in projection.tables if not t.clustering_key), None)


async def shard_documents(
    store: WideColumnStore, projection: Projection, shard: int, shards: int
) -> AsyncIterator[tuple[str, Document]]:
    """``(key, document)`` of every partition of one scan shard with a row in any of its tables.

    The version marks are scanned first, as ``read_documents`` reads them: a write landing
    during the scan then gives a document newer than its version, never older."""
    streamed = _streamed(projection)
    keys: dict[str, PartitionKey] = {}
    held: dict[str, dict[str, list[Row]]] = {}
    marks: dict[str, Row] = {}
    async for row in store.scan(projection.version_table.name, shard=shard, shards=shards):
        pk = key_json(projection, row.key)
        keys.setdefault(pk, _partition(projection, row))
        marks[pk] = row
    for table in projection.tables:
        if table is streamed:
            continue
        async for row in store.scan(table.name, shard=shard, shards=shards):
            pk = key_json(projection, row.key)
            keys.setdefault(pk, _partition(projection, row))
            held.setdefault(pk, {}).setdefault(table.name, []).append(row)
    if streamed is not None:
        async for row in store.scan(streamed.name, shard=shard, shards=shards):
            pk = key_json(projection, row.key)
            rows = held.pop(pk, {})
            rows[streamed.name] = [row]
            keys.pop(pk, None)
            yield pk, projection.document(_partition(projection, row), rows, marks.pop(pk, None))
    for pk, key in keys.items():
        yield pk, projection.document(key, held.get(pk, {}), marks.get(pk))


def _expected(pk: str, document: Document) -> Expected:
    doc_id, doc, version = document
    return doc_id, pk, version, None if doc is None else digest(doc)


async def _expected_pages(
    app: str, projection: str, store_url: str, shard: int, shards: int
) -> AsyncIterator[list[Expected]]:
    p = projection_of(app, projection)
    store = await open_wide_store(store_url)
    try:
        async for page in pages(shard_documents(store, p, shard, shards)):
            yield [_expected(pk, d) for pk, d in page]
    finally:
        await store.close()


def expected_task(
    app: str, projection: str, store_url: str, shards: int, part: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor (``mapInArrow`` over shard numbers in column ``id``): the expected record of every
    partition of those scan shards, a batch per scanned page."""
    for batch in part:
        for shard in batch.column("id").to_pylist():
            for page in iterate_async(lambda: _expected_pages(app, projection, store_url, shard, shards)):  # noqa: B023
                yield _expected_batch(page)


#: ``(key, rows by table, mark, highest write time of the live rows, any live row)`` -> its document.
_Documenter = Callable[[PartitionKey, dict[str, list[Row]], "Row | None", int, bool], Document]


def _documenter(p: Projection) -> _Documenter:
    """``p.document`` given the live rows' highest write time, which the decoder already took: the same
    rules (the mark's version when there is one; no document without a live row), or ``p.document`` itself
    when the app overrides it."""
    if type(p).document is not Projection.document:
        return lambda key, held, mark, version, live: p.document(key, held, mark)
    column = p.version_table.columns[0].name
    doc_id, build = p.document_id, p.build

    def document(
        key: PartitionKey, held: dict[str, list[Row]], mark: Row | None, version: int, live: bool
    ) -> Document:
        if mark is not None and (cell := mark.cells.get(column)) is not None:
            version = cell.writetime
        return doc_id(key), build(key, held) if live else None, version

    return document


def _expected_batch(out: list[Expected]) -> pa.RecordBatch:
    doc_ids, keys, versions, digests = zip(*out, strict=True) if out else ((), (), (), ())
    arrays = [pa.array(doc_ids, pa.string()), pa.array(keys, pa.string())]
    arrays += [pa.array(versions, pa.int64()), pa.array(digests, pa.string())]
    return pa.RecordBatch.from_arrays(arrays, schema=EXPECTED_ARROW)


def records_expected_task(
    app: str, projection: str, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor (``mapInArrow``): the expected record of every partition key in record batches
    (``io.ROW_SCHEMA``, only the projection's tables) sorted by ``pk``; a partition's records are
    consecutive and may span batches."""
    with few_collections():
        yield from _records_expected(projection_of(app, projection), batches)


def _records_expected(p: Projection, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    tables: list[str] = []
    pks: list[str] = []
    rows: list[Row] = []
    tops: list[int] = []
    for batch in batches:
        tables += batch.column("table").to_pylist()
        pks += batch.column("pk").to_pylist()
        decoded, highs = decode(batch.column("key").to_pylist(), batch.column("cells").to_pylist())
        rows += decoded
        tops += highs
        if not pks:
            continue
        last = pks[-1]
        cut = len(pks)
        while cut > 0 and pks[cut - 1] == last:
            cut -= 1
        if cut:
            yield _expected_batch(_grouped(p, tables, pks, rows, tops, cut))
            del tables[:cut], pks[:cut], rows[:cut], tops[:cut]
    if pks:
        yield _expected_batch(_grouped(p, tables, pks, rows, tops, len(pks)))


def _grouped(
    p: Projection, tables: list[str], pks: list[str], rows: list[Row], tops: list[int], n: int
) -> list[Expected]:
    """The expected records of the partitions of the first ``n`` records (consecutive by ``pk``);
    ``tops`` holds each row's highest write time, rows of other tables are left out."""
    version_table = p.version_table.name
    names = [t.name for t in p.tables]
    key_names = [c.name for c in p.partition_key]
    document = _documenter(p)
    out: list[Expected] = []
    start = 0
    while start < n:
        pk, end = pks[start], start + 1
        while end < n and pks[end] == pk:
            end += 1
        held: dict[str, list[Row]] = {name: [] for name in names}
        mark: Row | None = None
        version, live = 0, False
        for i in range(start, end):
            table, row = tables[i], rows[i]
            if table == version_table:
                mark = row
            elif (same := held.get(table)) is not None:
                same.append(row)
                if row.cells and (not live or tops[i] > version):
                    version, live = tops[i], True
        first = rows[start].key
        doc_id, doc, version = document({c: first[c] for c in key_names}, held, mark, version, live)
        out.append((doc_id, pk, version, None if doc is None else digest(doc)))
        start = end
    return out
