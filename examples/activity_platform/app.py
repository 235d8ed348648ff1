"""The reference activity platform as one Faust app: three agents and the indexer.

``converge worker examples.activity_platform.app:build`` runs it. Settings come
from the environment (see ``framework.app.AppSettings``); CONVERGE_ES_TOMBSTONES
selects the index's delete mode (``native`` for Elasticsearch, ``document`` for
noida-db, which keeps no delete tombstones).
"""

from __future__ import annotations

import os

import faust

from agents import INDEX_ALIAS, INDEX_MAPPINGS, TABLES, reference_agents
from agents.indexer import TOPIC_CHANGES, IndexerAgent, ProjectionSink
from framework.app import AppSettings, create_app
from framework.parking import DeadLetterWAL
from framework.runtime.binding import AgentRuntime, RuntimeConfig, register_parking
from framework.runtime.sinks import ChangeFeedSink, WideColumnSink
from framework.sync import run_sync
from stores.base import WideColumnStore
from stores.elasticsearch import ElasticsearchIndex
from stores.open import open_wide_store

APP_ID = "activity-platform"


async def _open_stores(settings: AppSettings) -> tuple[WideColumnStore, ElasticsearchIndex]:
    store = await open_wide_store(settings.resolved_wide_store())
    for schema in TABLES:
        await store.ensure_table(schema)
    es_url = settings.resolved_es_url()
    if es_url is None:
        raise RuntimeError("the activity platform needs CONVERGE_ES_URL (or AppSettings.es_url)")
    tombstones = os.environ.get("CONVERGE_ES_TOMBSTONES", "native")
    index = ElasticsearchIndex.from_url(es_url, tombstones=tombstones)  # type: ignore[arg-type]
    await index.ensure_index(INDEX_ALIAS, INDEX_MAPPINGS)
    await index.close()
    # a fresh client for the worker: this one belonged to run_sync's short-lived loop
    return store, ElasticsearchIndex.from_url(es_url, tombstones=tombstones)  # type: ignore[arg-type]


def build(settings: AppSettings | None = None, config: RuntimeConfig | None = None) -> faust.App:
    """The platform app: activities, engagement and insights agents, and the indexer."""
    settings = settings or AppSettings(app_id=os.environ.get("CONVERGE_APP_ID", APP_ID))
    app = create_app(settings)
    store, index = run_sync(_open_stores(settings))
    parking = DeadLetterWAL(settings.resolved_data_dir() / "dlq")
    register_parking(app, parking)
    changes = app.topic(TOPIC_CHANGES, key_type=bytes, value_type=bytes, key_serializer="raw",
                        value_serializer="raw")  # fmt: skip

    async def announce(key: bytes, value: bytes) -> None:
        fut = await changes.send(key=key, value=value)
        await fut  # delivered before the source event is acknowledged

    for agent in reference_agents():
        sinks = [WideColumnSink(store), ChangeFeedSink(announce, agent.projected_tables)]
        AgentRuntime(app, agent, sinks, parking, config)
    AgentRuntime(app, IndexerAgent(), [ProjectionSink(store, index)], parking, config)
    return app
