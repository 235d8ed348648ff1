"""The stream's id resolution in the backfill: the collapsed map read once, broadcast, applied.

``id_map_broadcast`` reads the ID mutation job's map from the store table
``converge_id_map`` on the driver (the entries the job also publishes on the
map topic; an app whose job never ran has none) and broadcasts it as
``{map key: intervals JSON}``; each task wraps it in ``BatchIdMap`` and
resolves every agent's owner ids with ``framework.idmutation.IdResolution``,
the worker's own step, so a backfill stores archived events under the same
final ids as the stream. The map is collected on the driver: its size is the
number of mutated ids, not of rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pyspark.sql import SparkSession

from framework.core.sync import run_sync
from framework.idmutation.collapse import Interval
from framework.idmutation.resolution import check_intervals, map_key
from framework.idmutation.tables import MAP_TABLE
from spark_batch.apps import load_app
from stores.open import open_wide_store

__all__ = ["BatchIdMap", "read_id_map", "id_map_broadcast"]

#: The cache's answer for a key it does not hold (its values may be None).
_MISSING: Literal[False] = False


class BatchIdMap:
    """A broadcast map table ``{map key: intervals JSON}`` as ``IdResolution`` reads it."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = table
        self.empty = not table
        self._parsed: dict[str, list[Interval] | None] = {}

    def intervals(self, tenant: str, ident: str) -> list[Interval] | None:
        key = map_key(tenant, ident)
        found = self._parsed.get(key, _MISSING)
        if found is False:
            text = self.table.get(key)
            found = self._parsed[key] = None if text is None else check_intervals(json.loads(text))
        return found


async def read_id_map(store_url: str) -> dict[str, str]:
    """Every entry of ``converge_id_map`` in the store (the table is created empty when missing)."""
    store = await open_wide_store(store_url)
    try:
        await store.ensure_table(MAP_TABLE)
        out: dict[str, str] = {}
        async for row in store.scan(MAP_TABLE.name):
            text = row.values().get("intervals")
            if isinstance(text, str):
                out[map_key(str(row.key["tenant"]), str(row.key["id"]))] = text
        return out
    finally:
        await store.close()


def id_map_broadcast(spark: SparkSession, store_url: str, app_spec: str) -> Any:
    """The broadcast map of an app that declares ``id_mutation`` (None otherwise)."""
    if load_app(app_spec).id_mutation is None:
        return None
    return spark.sparkContext.broadcast(run_sync(read_id_map(store_url)))
