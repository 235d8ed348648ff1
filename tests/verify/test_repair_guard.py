"""A repair that would delete an index it was not meant for refuses: the delete bound
(``framework.core.repair_guard``), the store identity (``stores.identity``), and a full sweep
of both example apps whose store lost every row (as a sweep pointed at an empty store sees
it): refused before any write, done with ``force``.

The sweeps run through the test kit's ``Driver`` (real SQLite store in memory, ``MemoryIndex``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.core.mutations import Delete
from framework.core.repair_guard import MIN_ALLOWED, RepairRefused, parse_delete_bound
from framework.settings import Settings
from framework.verify.digests import Ledger
from framework.verify.sweep import Sweep
from stores.identity import (
    IDENTITY_TABLE,
    IndexSource,
    StoreIdentity,
    ensure_store_identity,
    pairing_problem,
    public_url,
    read_store_identity,
    with_source,
)
from stores.sqlite.store import SqliteStore
from tests.verify.test_verifier import EXAMPLES, Example, sent, verifier


def test_the_bound_is_the_smallest_limit_a_percentage_never_below_the_minimum() -> None:
    default = parse_delete_bound("10%,1000")
    assert (
        default.allowed(600) == 60 and default.allowed(50_000) == 1000 and default.allowed(20) == MIN_ALLOWED
    )
    assert default.refusal(60, 600, "index x") is None
    refusal = default.refusal(600, 600, "index x")
    assert refusal is not None and "would delete 600 of its 600 documents" in refusal and "--force" in refusal
    assert parse_delete_bound("5").allowed(10**6) == 5 and parse_delete_bound("50%").allowed(1000) == 500
    assert (
        parse_delete_bound("none").allowed(10) is None
        and parse_delete_bound("none").refusal(10, 10, "x") is None
    )
    for bad in ("", "ten", "-1", "120%", "1,2", "5%,6%"):
        with pytest.raises(ValueError, match="delete bound"):
            parse_delete_bound(bad)


def test_the_setting_is_validated_and_defaults_to_a_tenth_at_most_1000() -> None:
    assert Settings.resolve("app", env={}).repair_max_deletes == "10%,1000"
    assert Settings.resolve("app", env={"CONVERGE_REPAIR_MAX_DELETES": "none"}).repair_max_deletes == "none"
    assert Settings.resolve("app", env={}, repair_max_deletes="25").repair_max_deletes == "25"
    with pytest.raises(ValueError, match="CONVERGE_REPAIR_MAX_DELETES"):
        Settings.resolve("app", env={"CONVERGE_REPAIR_MAX_DELETES": "lots"})


def test_a_store_identity_is_written_once_and_reading_creates_nothing(tmp_path: Path) -> None:
    async def run() -> None:
        store = await SqliteStore.open(tmp_path / "wide.db")
        try:
            assert await read_store_identity(store) is None
            with pytest.raises(Exception, match=IDENTITY_TABLE.name):
                store.schema(IDENTITY_TABLE.name)  # a read created no table
            made = await ensure_store_identity(store, "desk", clock=lambda: 1_700_000_000.0)
            assert (
                made.app == "desk" and len(made.store_id) == 32 and made.created_at == 1_700_000_000_000_000
            )
            assert await ensure_store_identity(store, "other") == made == await read_store_identity(store)
        finally:
            await store.close()
        reopened = await SqliteStore.open(tmp_path / "wide.db")
        try:
            assert await read_store_identity(reopened) == made
        finally:
            await reopened.close()
        other = await SqliteStore.open(tmp_path / "other.db")
        try:
            assert (await ensure_store_identity(other, "desk")).store_id != made.store_id
        finally:
            await other.close()

    asyncio.run(run())


def test_pairing_refuses_an_empty_or_another_store_and_accepts_an_index_recording_none() -> None:
    mine = StoreIdentity("a" * 32, "desk", 1_700_000_000_000_000)
    theirs = StoreIdentity("b" * 32, "desk", 1_700_000_000_000_000)
    built = IndexSource(mine.store_id, "desk", "sqlite:////srv/var/w1/wide.db", 1)
    url = "sqlite:////srv/var/support-desk/wide.db"
    assert pairing_problem(mine, {"tickets-v1": built}, url, "tickets") is None
    assert pairing_problem(None, {"tickets-v1": None}, url, "tickets") is None  # made before identities
    assert pairing_problem(theirs, {}, url, "tickets") is None  # no metadata kept (a memory index)
    empty = pairing_problem(None, {"tickets-v1": built}, url, "tickets")
    assert empty is not None and "\n" not in empty
    assert empty.startswith(f"store {url} was not the source of index tickets (tickets-v1): ")
    assert "records no store identity" in empty and "sqlite:////srv/var/w1/wide.db" in empty
    foreign = pairing_problem(theirs, {"tickets-v1": built}, url, "tickets")
    assert foreign is not None and f"it is store {theirs.store_id}" in foreign and mine.store_id in foreign
    assert IndexSource.from_meta(with_source({"properties": {}}, built)["_meta"]) == built
    assert public_url("cassandra://user:secret@db1:9042/ks") == "cassandra://db1:9042/ks"


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_sweep_that_would_delete_the_index_refuses_and_deletes_it_only_when_forced(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        held = d.documents(view)
        assert len(held) > MIN_ALLOWED
        # every source row of the view gone (the store a sweep pointed at an empty one reads)
        for table in {t.name for t in view.tables} | {view.version_table.name}:
            keys = {tuple(sorted(r.key.items())) for r in d.rows(table)}
            d.run(d.store.apply([Delete(table, dict(k), 10**18) for k in keys]))
        sweep = Sweep(verifier(d, tmp_path), Ledger(d.store, d.app.name), clock=lambda: d.now + 1)
        d.run(sweep.ensure())
        with pytest.raises(RepairRefused, match=rf"would delete {len(held)} of its {len(held)} documents"):
            d.run(sweep.run([view.name]))
        assert d.documents(view) == held  # nothing written
        report = d.run(sweep.run([view.name], force=True))
        assert report.repaired["orphaned"] == len(held) and d.documents(view) == {}
