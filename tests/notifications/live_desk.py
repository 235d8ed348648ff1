"""A live support desk with notifications on, for the tests that run its worker: the history,
the worker's settings, producing, draining, and the index and the store read or damaged behind
its back.

Real parts: the test's own noida-db (``fresh_stack``), a ``converge worker`` subprocess of
``tests.notifications.notified_desk:app``, a SQLite store in the test's directory.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.core.mutations import Upsert
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.notifications.entries import entry_from_row
from framework.notifications.schema import NOTIFICATION_TABLE
from framework.worker.processes import start_worker, stop_worker
from stores.open import open_search_index, open_wide_store
from tests.notifications.notified_desk import app

SPEC = "tests.notifications.notified_desk:app"
Documents = dict[str, tuple[dict[str, Any], int | None]]


@dataclass
class LiveDesk:
    """One app id's topics on ``stack``, its generated history by topic and its worker's settings."""

    broker: str
    es_url: str
    app_id: str
    history: Any  # examples.support_desk.history.History
    delivered: list[Any]  # the history's events in a scrambled order, some twice
    env: dict[str, str]
    log: Path

    @property
    def events(self) -> dict[str, list[Any]]:
        """The delivered events by topic."""
        return by_topic(self.delivered)

    @classmethod
    def create(cls, stack: LocalStack, tmp_path: Path, seed: int, **env: str) -> LiveDesk:
        assert stack.info is not None
        broker, es_url = f"kafka://{stack.info.kafka_bootstrap}", stack.info.es_url
        app_id = f"support-desk-{uuid.uuid4().hex[:8]}"
        history = generate_history(seed, 12, (f"{app_id}-a", f"{app_id}-b"))
        asyncio.run(ensure_topics(broker, {t: 2 for t in app.topics()}))
        store = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
        settings = {"CONVERGE_ES_URL": es_url, "CONVERGE_ES_TOMBSTONES": "document",
                    "CONVERGE_APP_ID": app_id, "CONVERGE_WIDE_STORE": store, "CONVERGE_PARTITIONS": "2",
                    **env}  # fmt: skip
        delivered = deliver(history.events, seed)
        return cls(broker, es_url, app_id, history, delivered, settings, tmp_path / "worker" / "worker.log")

    def start_worker(self) -> Any:
        return start_worker(SPEC, self.log.parent, self.broker, self.env)

    def produce(self, events: list[Any] | None = None) -> int:
        """``events`` (default: every delivered event), topic by topic; how many."""
        chosen = by_topic(self.delivered if events is None else events)
        for topic, evs in chosen.items():
            asyncio.run(produce(self.broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs]))
        return sum(map(len, chosen.values()))

    def drain(self) -> None:
        """Wait until the group has committed everything produced so far on every topic, the
        agents' first, then the change and group topics (the projector's and the totals')."""
        for topic in app.topics():
            drained = asyncio.run(wait_drained(self.broker, self.app_id, topic, 150))
            assert drained, self.log.read_text()[-3000:]

    def run_worker(self) -> None:
        """Start a worker, wait until it drained what was produced, stop it (SIGINT): exit 0."""
        worker = self.start_worker()
        try:
            self.drain()
        finally:
            code = stop_worker(worker)
        assert code == 0, self.log.read_text()[-3000:]

    def documents(self) -> Documents:
        """The tickets projection's documents in the index, with their versions."""
        return asyncio.run(index_documents(self.es_url, app.projections[0].alias))

    def damage(self, docs: Documents, ids: list[str], *, ahead: bool = False) -> None:
        """Behind the framework's back: delete ``ids[0:2]``, edit ``ids[2]`` at its version and,
        with ``ahead``, put ``ids[3]`` 1,000 versions ahead of its mark, edited."""
        asyncio.run(damage_index(self.es_url, app.projections[0].alias, docs, ids, ahead))


async def index_documents(es_url: str, alias: str) -> Documents:
    """The documents of ``alias`` with their versions, after a refresh."""
    index = open_search_index(es_url, "document")
    try:
        await index.refresh(alias)
        return {h.doc_id: (dict(h.source), h.version) async for h in index.scan(alias)}
    finally:
        await index.close()


async def damage_index(es_url: str, alias: str, docs: Documents, ids: list[str], ahead: bool) -> None:
    """``LiveDesk.damage`` on any alias: ``docs`` are its documents as written."""
    index = open_search_index(es_url, "document")
    try:
        for doc_id in ids[:2]:
            await index.delete(alias, doc_id, int(docs[doc_id][1] or 0))
        doc, version = docs[ids[2]]
        await index.index(alias, ids[2], {**doc, "edited": "by hand"}, int(version or 0))
        if ahead:
            doc, version = docs[ids[3]]
            await index.index(alias, ids[3], {**doc, "edited": "ahead"}, int(version or 0) + 1000)
        await index.refresh(alias)
    finally:
        await index.close()


async def add_orphan(es_url: str, alias: str, doc_id: str) -> None:
    """Index a document no partition of the store maps to, behind the framework's back."""
    index = open_search_index(es_url, "document")
    try:
        await index.index(alias, doc_id, {"made": "up by hand"}, 7)
        await index.refresh(alias)
    finally:
        await index.close()


async def write_past_the_feed(store_url: str, table: str, key: dict[str, Any], cells: dict[str, Any],
                              version: int) -> None:  # fmt: skip
    """Write ``cells`` into a row of the store directly: no change record, no notification entry
    (a fix by hand, a tool that bypasses the framework)."""
    store = await open_wide_store(store_url)
    try:
        await store.apply([Upsert(table, key, cells, version)])
    finally:
        await store.close()


async def last_ingestion(store_url: str) -> int:
    """The ingestion time (epoch µs) of the newest notification entry in the store: once a
    verifier's position reaches it, it has verified every entry."""
    store = await open_wide_store(store_url)
    try:
        return max([entry_from_row(r).ingested_at async for r in store.scan(NOTIFICATION_TABLE.name)])
    finally:
        await store.close()
