"""``converge spark check --repair`` and ``converge verify --sweep`` pointed at a store that is not
the one the index was built from refuse before any write, with one line saying why: an empty
store (the app's tables, no identity) and a foreign one (another store holding the same app's
data), on both example apps. The index records its source store as a worker records it
(``stores.identity``); the refusals come before Spark starts. One noida-db for the module.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk.generator import generate_history as desk_history
from framework.app import App
from framework.cli import main
from framework.core.events import Event
from framework.local_stack import LocalStack, StackInfo
from framework.worker.loading import load_object
from stores.identity import (
    StoreIdentity,
    StoreMismatch,
    ensure_store_identity,
    index_sources,
    pair_index,
    require_pairing,
    source_of,
    with_source,
)
from stores.open import open_search_index, open_wide_store
from tests.spark.support import populate, sqlite_url

APPS = {
    "examples.support_desk.app:app": lambda: list(desk_history(5, 20).events),
    "examples.activity_platform.app:app": lambda: list(activity_history(9, 80, n_orgs=2).events),
}


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    """A noida-db of this module's own: the apps' own aliases are created in it."""
    with LocalStack(tmp_path_factory.mktemp("refusals-stack")) as stack:
        assert stack.info is not None
        yield stack.info


async def _store(url: str, app: App, events: list[Event] | None, identity: bool) -> StoreIdentity | None:
    """A SQLite store at ``url`` with ``app``'s tables (and ``events`` applied); its identity."""
    if events:
        await populate(url, events, app)
    store = await open_wide_store(url)
    try:
        for t in app.tables:
            await store.ensure_table(t)
        return await ensure_store_identity(store, app.name) if identity else None
    finally:
        await store.close()


async def _index(es_url: str, app: App, source: StoreIdentity, url: str) -> None:
    """Each projection's index, created recording ``source`` (as a worker creates it)."""
    index = open_search_index(es_url, "document")
    try:
        for p in app.projections:
            await index.ensure_index(p.alias, with_source(p.mappings, source_of(source, url)))
    finally:
        await index.close()


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


@pytest.mark.timeout(300)
@pytest.mark.parametrize("spec", sorted(APPS))
def test_check_repair_and_verify_refuse_an_empty_and_a_foreign_store(
    spec: str, own_stack: StackInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = load_object(spec)
    events = APPS[spec]()
    source_url = sqlite_url(tmp_path / "w1" / "wide.db")
    source = asyncio.run(_store(source_url, app, events, identity=True))
    assert source is not None
    asyncio.run(_index(own_stack.es_url, app, source, source_url))
    empty_url = sqlite_url(tmp_path / app.name / "wide.db")
    asyncio.run(_store(empty_url, app, None, identity=False))
    foreign_url = sqlite_url(tmp_path / "elsewhere" / "wide.db")
    foreign = asyncio.run(_store(foreign_url, app, events, identity=True))
    assert foreign is not None and foreign.store_id != source.store_id
    alias = app.projections[0].alias
    es = ["--es-url", own_stack.es_url, "--es-tombstones", "document"]
    for url, why in (
        (empty_url, "it records no store identity"),
        (foreign_url, f"it is store {foreign.store_id}"),
    ):
        expected = f"store {url} was not the source of index {alias} ({alias}-v1): {why}"
        check = ["spark", "check", "--app", spec, "--wide-store", url, *es, "--repair", "--quiet"]
        err = _refused(check, capsys)
        assert err.startswith(f"converge spark check: error: {expected}"), err
        assert f"the index was built from store {source.store_id} (app {app.name}) at {source_url}" in err
        apart = ["--checkpoints", sqlite_url(tmp_path / "cp.db"), "--dlq-root", str(tmp_path / "dlq")]
        verify = [
            "verify",
            "--app",
            spec,
            "--wide-store",
            url,
            *es,
            "--once",
            "--sweep",
            "--settle",
            "0",
            *apart,
        ]
        err = _refused(verify, capsys)
        assert err.startswith(f"converge verify: error: {expected}"), err
    # the index holds nothing but what was created: no refusal wrote into it
    assert asyncio.run(_count(own_stack.es_url, alias)) == 0

    async def paired() -> None:  # the store the index was built from passes
        store, index = await open_wide_store(source_url), open_search_index(own_stack.es_url, "document")
        try:
            await require_pairing(store, index, alias, source_url)
        finally:
            await index.close()
            await store.close()

    asyncio.run(paired())


async def _count(es_url: str, alias: str) -> int:
    index = open_search_index(es_url, "document")
    try:
        await index.refresh(alias)
        return len([h async for h in index.scan(alias)])
    finally:
        await index.close()


def test_a_worker_records_its_store_on_an_index_that_records_none_and_leaves_another_store_s(
    own_stack: StackInfo, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        store = await open_wide_store(sqlite_url(tmp_path / "wide.db"))
        index = open_search_index(own_stack.es_url, "document")
        try:
            mine = await ensure_store_identity(store, "desk")
            await index.ensure_index("legacy-desk", {"properties": {}})  # made before identities
            assert await index_sources(index, "legacy-desk") == {"legacy-desk-v1": None}
            await require_pairing(store, index, "legacy-desk", "sqlite:///x")  # records none: pairs
            await pair_index(index, "legacy-desk", mine, sqlite_url(tmp_path / "wide.db"))
            recorded = (await index_sources(index, "legacy-desk"))["legacy-desk-v1"]
            assert recorded is not None and recorded.store_id == mine.store_id
            other = StoreIdentity("f" * 32, "desk", 0)
            with caplog.at_level(logging.WARNING, logger="stores.identity"):
                await pair_index(index, "legacy-desk", other, "sqlite:///other.db")
            assert "a repair from this store refuses" in caplog.text
            assert (await index_sources(index, "legacy-desk"))["legacy-desk-v1"] == recorded
            with pytest.raises(StoreMismatch):
                await require_pairing(await _other(tmp_path), index, "legacy-desk", "sqlite:///other.db")
        finally:
            await index.close()
            await store.close()

    asyncio.run(run())


async def _other(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = await open_wide_store(sqlite_url(tmp_path / "other.db"))
    await ensure_store_identity(store, "desk")
    return store
