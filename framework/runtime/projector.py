"""The projection step: read a partition's source rows, build its document, write it to the index.

The stream's projector runs it for every change event; the batch jobs run
the same functions for backfill, repair and reindex. The stream's projector also records what
it wrote, beside the marks (``framework.runtime.written_records.WRITTEN``), for the change verifier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal

from framework.core.aggregate import Aggregate
from framework.core.mutations import Mutation
from framework.core.projection import Document, PartitionKey, Projection
from framework.core.rows import Row
from framework.runtime.change_feed import changed_partitions
from framework.runtime.errors import MessageError
from framework.runtime.processor import bounded, parse_work
from framework.runtime.sinks import Probe
from framework.runtime.work import Work
from framework.runtime.written import Position, WrittenDocuments
from framework.runtime.written_records import (
    WRITTEN,
    Written,
    document_digest,
    source_versions,
    written_upsert,
)
from framework.settings import env_setting
from stores.base import BulkResult, IndexOp, SearchIndex, WideColumnStore
from stores.errors import PermanentStoreError, TransientStoreError

__all__ = [
    "read_document",
    "read_documents",
    "read_shared_documents",
    "read_shared_sources",
    "write_document",
    "project_partition",
    "ProjectionProcessor",
]

Action = Literal["index", "delete", "stale"]

#: Most documents one read and one bulk request of the projector cover.
MAX_DOCUMENTS = 2000


async def read_document(store: WideColumnStore, projection: Projection, key: PartitionKey) -> Document:
    """The current document of one partition, read from every source table and the version mark."""
    return (await read_documents(store, projection, [key]))[0]


async def read_documents(
    store: WideColumnStore, projection: Projection, keys: Sequence[PartitionKey]
) -> list[Document]:
    """The current documents of many partitions: one multi-partition read per source table.

    The version marks are read before the tables. A write that commits between the reads then
    gives a document newer than its version, which the projection of that write (at its own,
    higher version) replaces; read the other way round, it would give older content at the new
    version, which the index keeps over the newer document arriving first. This needs an apply
    to become visible at once, as SQLite's transaction does; the Cassandra adapter writes a
    batch's partitions concurrently, so a reader there can still see a mark before its data."""
    return (await read_shared_documents(store, [projection], keys))[0]


async def read_shared_documents(
    store: WideColumnStore, projections: Sequence[Projection], keys: Sequence[PartitionKey]
) -> list[list[Document]]:
    """``read_documents`` of each of ``projections``, which share their version table and source
    tables (``Projection.marks_from``), from one read of them."""
    if not keys:
        return [[] for _ in projections]
    first = projections[0]
    for p in projections[1:]:
        if p.version_table.name != first.version_table.name or p.source_names != first.source_names:
            raise ValueError(f"{p.name} does not share the marks and source tables of {first.name}")
    marks, rows = await read_shared_sources(store, first, keys)
    return [[p.document(key, rows[i], marks[i]) for i, key in enumerate(keys)] for p in projections]


async def read_shared_sources(
    store: WideColumnStore, projection: Projection, keys: Sequence[PartitionKey]
) -> tuple[list[Row | None], list[dict[str, list[Row]]]]:
    """What the documents of ``keys`` are built from: each partition's version mark and its rows
    by source table (the marks read first, as ``read_documents`` says)."""
    marks = await store.read_rows(projection.version_table.name, keys)
    by_table = {t.name: await store.read_partitions(t.name, keys) for t in projection.tables}
    return marks, [{name: read[i] for name, read in by_table.items()} for i in range(len(keys))]


async def write_document(
    index: SearchIndex, alias: str, document: Document, floor: int = 0
) -> tuple[Action, int]:
    """Index the document at its version, or delete it when it is None; ``floor`` raises a
    delete's version (to remove a document the index holds at a higher one)."""
    doc_id, doc, version = document
    if doc is None:
        version = max(version, floor)
        return ("delete" if await index.delete(alias, doc_id, version) else "stale"), version
    return ("index" if await index.index(alias, doc_id, doc, version) else "stale"), version


async def project_partition(
    store: WideColumnStore,
    index: SearchIndex,
    projection: Projection,
    key: PartitionKey,
    *,
    alias: str | None = None,
    floor: int = 0,
) -> tuple[Action, int]:
    """Read and write one partition's document now (into ``alias``, default the projection's)."""
    document = await read_document(store, projection, key)
    return await write_document(index, alias or projection.alias, document, floor)


class ProjectionProcessor:
    """Re-projects the partitions each change record names; one document's changes are serial.

    A record is the unit of work: its partitions are read together and written in
    one bulk request, and a record that cannot be projected is parked whole (its
    replay re-projects every partition it names, which is idempotent). A document
    identical, version and content, to the one last written for it is not sent
    again when the read behind that write already covered every record naming it
    now (``framework.runtime.written``). The records in the change topic before a
    read are those ``prepare`` has seen and, when the runtime sets ``highwater``
    (the consumer's: the offset the next record of a partition will get, or None),
    everything below it.

    ``shared``: the views sharing ``projection``'s marks (``marks_from``), each with its
    target. Their changes are announced on ``projection``'s topic only, so this processor
    projects them too, from the same read, after ``projection``'s own write.

    ``record`` (default: the setting ``verify_record``, on): after each bulk request, record
    every write the index took (``framework.runtime.written_records.WRITTEN``: version, digest of the
    document, digest of the row versions it was built from, all from the read already made) in
    one store write, for the change verifier.
    """

    batchable = True
    #: called with a work's ``tp`` (the partition type of the consumer that set it)
    highwater: Callable[[Any], int | None] | None = None

    def __init__(
        self,
        projection: Projection,
        store: WideColumnStore,
        index: SearchIndex,
        sink_timeout: float = 10.0,
        shared: Sequence[tuple[Projection, SearchIndex]] = (),
        record: bool | None = None,
    ) -> None:
        self.projection = projection
        self.name = f"project.{projection.name}"
        self.store, self.index, self.sink_timeout = store, index, sink_timeout
        self.targets = [(projection, index, WrittenDocuments())]
        self.targets += [(p, target, WrittenDocuments()) for p, target in shared]
        self.written = self.targets[0][2]
        #: the index's health check, probed while the index is down (``framework.runtime.sinks.Probe``)
        self.probes: dict[str, Probe] = {}
        answers = getattr(index, "answers", None)
        if callable(answers):
            self.probes["index"] = answers
        self._seen: dict[Hashable, int] = {}  # per partition, the last offset taken from the topic
        if record is None:
            record = _on(env_setting("verify_record"))
        self.record = record
        self._recording = False  # the record's table is ensured

    def on_rebalance(self) -> None:
        """Partitions moved: documents may have been written by another worker since."""
        for _, _, written in self.targets:
            written.forget()
        self._seen.clear()

    def prepare(self, work: Work) -> None:
        if work.offset > self._seen.get(work.tp, -1):
            self._seen[work.tp] = work.offset
        try:
            work.event = parse_work(work)
        except Exception:  # noqa: BLE001 - reported by __call__ when the work runs
            work.event = None

    def _keys(self, work: Work) -> list[PartitionKey]:
        event = work.event if work.event is not None else parse_work(work)
        try:
            return changed_partitions(event, self.projection)
        except Exception as exc:  # noqa: BLE001 - a malformed change is the message's
            raise MessageError("map", exc) from exc

    async def __call__(self, work: Work) -> None:
        keys = self._keys(work)
        await self._project(keys, {self.projection.document_id(k): (work.tp, work.offset) for k in keys})

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        items: list[tuple[Work, list[PartitionKey]]] = []
        bad: list[tuple[Work, MessageError]] = []
        for work in works:
            try:
                items.append((work, self._keys(work)))
            except MessageError as exc:
                bad.append((work, exc))
        return items, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        heard: dict[str, Position | None] = {}
        for work, keys in items:
            for key in keys:
                doc_id = self.projection.document_id(key)
                at = heard.get(doc_id, (work.tp, work.offset))
                # one document's records share a partition; if not, its last write covers none
                heard[doc_id] = None if at is None or at[0] != work.tp else (work.tp, max(at[1], work.offset))
        positions = {doc_id: at for doc_id, at in heard.items() if at is not None}
        await self._project([key for _, keys in items for key in keys], positions)

    async def _project(self, keys: Sequence[PartitionKey], heard: dict[str, Position] | None = None) -> None:
        """Each partition once, ``MAX_DOCUMENTS`` at a time: one multi-partition read, then one
        bulk request. ``heard``: per document, the latest record naming it (a document without
        one is always written)."""
        unique = list({self.projection.document_id(key): key for key in keys}.values())
        for i in range(0, len(unique), MAX_DOCUMENTS):
            await self._project_chunk(unique[i : i + MAX_DOCUMENTS], heard)

    async def _project_chunk(self, unique: Sequence[PartitionKey], heard: dict[str, Position] | None) -> None:
        read_after = self._in_topic({at[0] for at in (heard or {}).values()})
        read = read_shared_sources(self.store, self.projection, unique)
        marks, rows = await bounded("wide_column", self.sink_timeout, read)
        documents = [
            [p.document(key, rows[i], marks[i]) for i, key in enumerate(unique)] for p, _, _ in self.targets
        ]
        sources: list[int] = []
        taken: list[tuple[WrittenDocuments, Any]] = []
        writes: list[Mutation] = []
        try:
            for (view, index, written), docs in zip(self.targets, documents, strict=True):
                positions = heard
                if heard and view is not self.projection:  # the record positions by this view's ids
                    pairs = zip(documents[0], docs, strict=True)
                    positions = {doc[0]: heard[own[0]] for own, doc in pairs if own[0] in heard}
                ops, records = written.new_writes(
                    [IndexOp(doc_id, version, doc) for doc_id, doc, version in docs], positions, read_after
                )
                if ops:
                    result = await bounded("index", self.sink_timeout, self._bulk(view, index, ops))
                    if self.record:
                        sources = sources or _source_versions(marks, rows)
                        by_id = {doc[0]: sources[i] for i, doc in enumerate(docs)}
                        writes += _records(view, ops, result, by_id)
                    taken.append((written, records))
        finally:
            # the views' records in one write (also when a later view's write failed), before the
            # writes they record are remembered as done
            if writes:
                await bounded("wide_column", self.sink_timeout, self._record(writes))
            for written, records in taken:
                written.record(records)

    async def _record(self, writes: Sequence[Mutation]) -> None:
        """Write the records of what the index took (``framework.runtime.written_records.WRITTEN``)."""
        if not self._recording:
            await self.store.ensure_table(WRITTEN)
            self._recording = True
        await self.store.apply(writes)

    def _in_topic(self, partitions: set[Hashable]) -> dict[Hashable, int]:
        """Per partition, the last offset known to be in the topic now (taken, or below the
        consumer's high watermark)."""
        out = {tp: self._seen[tp] for tp in partitions if tp in self._seen}
        if self.highwater is not None:
            for tp in partitions:
                try:
                    end = self.highwater(tp)
                except Exception:  # noqa: BLE001 - not assigned (any more): only what was taken counts
                    continue
                if end is not None and end - 1 > out.get(tp, -1):
                    out[tp] = end - 1
        return out

    @staticmethod
    async def _bulk(view: Projection, index: SearchIndex, ops: Sequence[IndexOp]) -> BulkResult:
        result = await index.bulk(view.alias, ops)
        if result.failed:
            first, alias = result.failed[0], view.alias
            text = f"bulk {alias}: {len(result.failed)} failed ({first.doc_id}: {first.reason})"
            raise TransientStoreError(text) if result.retryable else PermanentStoreError(text)
        return result


def _records(
    view: Projection, ops: Sequence[IndexOp], result: BulkResult, sources: dict[str, int]
) -> list[Mutation]:
    """The records of the writes of ``ops`` the index took, at their versions."""
    took = {item.doc_id for item in result.items if item.outcome == "ok"}
    versions = not isinstance(view, Aggregate)  # an entity without contributions stores none
    at = int(time.time() * 1e6)
    out: list[Mutation] = []
    for op in ops:
        if op.doc_id in took:
            digest = document_digest(op.doc if versions else op.doc or None, op.version, versions=versions)
            out.append(
                written_upsert(
                    view.name, op.doc_id, Written(op.version, digest, sources.get(op.doc_id, 0)), at
                )
            )
    return out


def _source_versions(marks: Sequence[Row | None], rows: Sequence[dict[str, list[Row]]]) -> list[int]:
    """The digest of each partition's row versions (``digests.source_versions``), in order."""
    return [source_versions(mark, read) for mark, read in zip(marks, rows, strict=True)]


def _on(value: str | None) -> bool:
    """A boolean setting's value (unset: on)."""
    return value is None or value.strip().lower() not in ("0", "false", "off", "no")
