"""``converge spark retention`` on an app with aggregates (the activity platform): an expired
tenant's entities are re-projected into their aggregates' contributions in the store (not the
index, which has no such alias), so no contribution of that tenant is left, and every other
tenant's contributions are those the backfill wrote.

Real parts: local Spark, a SQLite store, noida-db (the index and the group topics).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.aggregates.contributions import NONE
from framework.aggregates.tables import tables_of
from framework.cli import main
from framework.local_stack import StackInfo
from spark_batch.archive import write_jsonl
from stores.open import open_wide_store, sqlite_url

pytestmark = pytest.mark.slow
SPEC = "examples.activity_platform.app:app"
DAY_S = 86_400


async def _contributions(url: str) -> dict[str, dict[str, list[str]]]:
    """Per aggregate: entity -> the series it contributes to."""
    store = await open_wide_store(url)
    try:
        out: dict[str, dict[str, list[str]]] = {}
        for a in app.aggregates:
            rows: dict[str, list[str]] = {}
            async for r in store.scan(tables_of(a).contrib.name):
                if r.cells and r.cells["measures"].value != NONE:  # NONE: a group the entity left
                    rows.setdefault(str(r.key["entity"]), []).append(str(r.key["series"]))
            out[a.name] = rows
        return out
    finally:
        await store.close()


def test_spark_retention_re_projects_aggregates_into_their_contributions(
    tmp_path: Path, stack: StackInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGE_BROKER", f"kafka://{stack.kafka_bootstrap}")  # the groups' announcements
    history = generate_history(5, 60).events
    last_s = max(e.version for e in history) / 1e6
    write_jsonl(history, tmp_path / "archive.jsonl")
    url = sqlite_url(tmp_path / "wide.db")
    common = ["--app", SPEC, "--wide-store", url, "--es-url", stack.es_url, "--es-tombstones", "document"]
    backfill = ["spark", "backfill", str(tmp_path / "archive.jsonl"), "--project", "--quiet",
                "--dlq-root", str(tmp_path / "dlq"), "--denylist-store", "target", *common]  # fmt: skip
    assert main(backfill) == 0
    before = asyncio.run(_contributions(url))
    assert all(any("org-0001" in s for ss in rows.values() for s in ss) for rows in before.values())
    retention = ["spark", "retention", "--shards", "2", "--quiet", "--now", str(last_s + 200 * DAY_S),
                 "--checkpoints", sqlite_url(tmp_path / "cp.db"), "--locks", sqlite_url(tmp_path / "l.db"),
                 *common]  # fmt: skip
    assert main(retention) == 0
    after = asyncio.run(_contributions(url))
    for name, rows in before.items():  # 200 days on: org-0001 (kept 182 days) expired, the others (730) kept
        kept = {e: ss for e, ss in rows.items() if not any("org-0001" in s for s in ss)}
        assert kept and after[name] == kept, name
