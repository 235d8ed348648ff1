"""``converge spark check --repair`` that would delete more index documents than the bound
refuses with one line and writes nothing; ``--force`` repairs. The store is the index's source
(recorded as a worker records it), so only the bound stands in the way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from examples.activity_platform.history import History
from examples.activity_platform.oracle import Expected
from framework.cli import main
from framework.local_stack import StackInfo
from spark_batch.io import open_index
from stores.identity import ensure_store_identity, record_source, source_of
from stores.open import open_wide_store
from tests.spark.support import APP, TOMBSTONES, documents, populate, project_all, sqlite_url, unique_alias

ORPHANS = 12


async def _paired(url: str, es_url: str, alias: str) -> None:
    """Record the store at ``url`` as the source of ``alias``'s index; add ``ORPHANS`` orphans."""
    store = await open_wide_store(url)
    index = open_index(es_url, TOMBSTONES)
    try:
        identity = await ensure_store_identity(store, "activity-platform")
        assert await record_source(index, alias, source_of(identity, url)) == [f"{alias}-v1"]
        for i in range(ORPHANS):
            assert await index.index(alias, f"orphan-{i}", {"hub_id": f"orphan-{i}", "has_record": False}, 7)
    finally:
        await index.close()
        await store.close()


@pytest.mark.timeout(600)
def test_a_repair_beyond_the_bound_refuses_and_is_forced(
    history: History, expected: Expected, stack: StackInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "wide.db")
    alias = unique_alias("bound")
    asyncio.run(populate(url, history.events))
    asyncio.run(project_all(url, stack.es_url, alias, expected.documents))
    asyncio.run(_paired(url, stack.es_url, alias))
    total = len(expected.documents) + ORPHANS
    argv = ["spark", "check", "--app", APP, "--projection", "activities", "--alias", alias,
            "--wide-store", url, "--es-url", stack.es_url, "--es-tombstones", TOMBSTONES, "--quiet",
            "--shards", "2", "--slices", "2", "--repair", "--max-deletes", "5"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"converge spark check: error: the repair of index {alias} would delete {ORPHANS} of its {total} "
        f"documents, more than the bound of 5 (repair_max_deletes 5): is the store the one the index was "
        f"built from? Pass --force to delete them anyway, or raise --max-deletes"
    )
    assert len(asyncio.run(documents(stack.es_url, alias))) == total  # nothing deleted
    assert main([*argv, "--force"]) == 0
    assert set(asyncio.run(documents(stack.es_url, alias))) == set(expected.documents)
