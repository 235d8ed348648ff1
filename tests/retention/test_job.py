"""The retention job under the coordinator (SQLite locks and checkpoints): its turn comes after a
fake predecessor's, a failed index process is repaired alone, store overrides apply, the CLI runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework.cli import main
from framework.jobs import CoordinatorSettings, JobCoordinator
from framework.retention import POLICY_TABLE, RetentionError, policy_row, run_retention
from framework.testing import Driver
from stores.open import sqlite_url
from stores.sqlite import SqliteStore
from tests.retention.support import coordination, live_cells, retain
from tests.retention.toy import NOW_US, STEP, item_event, plain, toy_app

NOW_S = NOW_US / 1e6
OLD = [item_event("set", "o1", "i1", 3), item_event("log", "o1", "i1", 4), item_event("set", "o2", "i2", 2)]
NEW = [item_event("set", "o1", "i1", 30, "b"), item_event("set", "o3", "i3", 25)]


def test_retention_takes_its_turn_after_its_predecessor(tmp_path: Path) -> None:
    with Driver(toy_app()) as driver, coordination(tmp_path) as coord:
        ingest = [
            JobCoordinator(
                coord.locks,
                CoordinatorSettings(domain, "ingest", "retention", start_with="ingest"),
                checkpoints=coord.checkpoints,
            )
            for domain in ("item", "item_log")
        ]
        order = {"predecessor": "ingest", "start_with": "ingest"}
        run = retain(driver, coord, NOW_S, **order)  # nobody ran yet: ingest starts the cycle
        assert set(run.skipped) == {"item", "item_log"} and "ingest" in run.skipped["item"]
        assert not run.tables

        async def ingest_round(events: list, domains: int = 2) -> None:  # type: ignore[type-arg]
            for job in ingest[:domains]:
                async with job.turn() as turn:
                    assert turn
                    await driver.store.apply([m for e in events for m in driver.app.agents[0].handle(e)])
                    events = []

        driver.run(ingest_round(OLD + NEW))
        before = live_cells(driver, "item")
        assert ("o1", "i1") in before and live_cells(driver, "item_log")
        run = retain(driver, coord, NOW_S, **order)
        assert not run.skipped and run.batches == {"item": 1, "item_log": 1}
        assert live_cells(driver, "item") == {
            ("o1", "i1"): {"b": (f"b{30 * STEP}", 30 * STEP)},  # a (step 3) went, b (step 30) stayed
            ("o2", "i2"): before[("o2", "i2")],  # o2 keeps everything
            ("o3", "i3"): before[("o3", "i3")],
        }
        assert live_cells(driver, "item_log") == {}
        again = retain(driver, coord, NOW_S, **order)  # ingest has not run since: not our turn
        assert set(again.skipped) == {"item", "item_log"}
        status = driver.run(coord.checkpoints.get("coordinator/item/retention"))
        assert status is not None and json.loads(status.value) == {"batch_id": 1, "now_us": NOW_US}
        driver.run(ingest_round([], domains=1))  # ingest ran on item only: retention may run there only
        run = retain(driver, coord, NOW_S, **order)
        assert run.batches == {"item": 2} and set(run.skipped) == {"item_log"}
        driver.run(ingest_round([], domains=1))
        lock = coord.locks.try_acquire("item", "someone-else")  # another job holds the domain
        assert lock is not None
        try:
            assert "locked" in retain(driver, coord, NOW_S, **order).skipped["item"]
        finally:
            coord.locks.release(lock)


def test_a_failed_index_process_is_repaired_alone(tmp_path: Path) -> None:
    app = toy_app()
    with Driver(app) as driver, coordination(tmp_path) as coord:
        driver.send(OLD + NEW)
        docs = driver.documents("items")
        assert set(docs) == {"o1:i1", "o2:i2", "o3:i3"}
        with pytest.raises(RetentionError, match="no index"):
            driver.run(
                run_retention(
                    app,
                    driver.store,
                    checkpoints=coord.checkpoints,
                    locks=coord.locks,
                    index=None,
                    clock=lambda: NOW_S,
                )
            )
        assert driver.documents("items") == docs  # the store process ran, the index has not yet
        assert ("o1", "i1", 4 * STEP, "log-o1-i1-21600000000-a") not in live_cells(driver, "item_log")
        run = retain(driver, coord, NOW_S + 1)
        assert run.batches == {"item": 2, "item_log": 1}
        assert "item" in run.reprojected
        after = driver.documents("items")
        assert after["o1:i1"][0] == {"b": f"b{30 * STEP}"}
        assert after["o2:i2"] == docs["o2:i2"]
        state = driver.run(coord.checkpoints.get("jobs/retention.item/done/store"))
        assert state is not None and json.loads(state.value)["batch_id"] == 2


def test_policy_table_override_applies_at_the_next_run(tmp_path: Path) -> None:
    with Driver(toy_app()) as driver, coordination(tmp_path) as coord:
        driver.send(OLD + NEW)
        driver.run(driver.store.ensure_table(POLICY_TABLE))
        driver.run(driver.store.apply([policy_row("o2", "item", 1, 1)]))  # o2: one day instead of forever
        retain(driver, coord, NOW_S)
        assert ("o2", "i2") not in live_cells(driver, "item")


def _write(path: Path) -> None:
    async def go() -> None:
        store = await SqliteStore.open(path)
        for t in plain.tables:
            await store.ensure_table(t)
        await store.apply([m for e in OLD + NEW for m in plain.agents[0].handle(e)])
        await store.close()

    import asyncio

    asyncio.run(go())


def test_cli_dry_run_then_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "wide.db"
    _write(db)
    base = ["retention", "run", "--app", "tests.retention.toy:plain", "--wide-store", sqlite_url(db)]
    assert main([*base, "--dry-run", "--json", "--now", str(NOW_S)]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] and dry["tables"]["item"]["rows_deleted"] == 0  # o2 keeps its row forever
    assert dry["tables"]["item"]["rows_trimmed"] == 1 and dry["tables"]["item_log"]["rows_deleted"] == 1
    assert main([*base, "--now", str(NOW_S)]) == 0
    out = capsys.readouterr().out
    assert "item: 3 rows examined" in out and "deleted 0 rows and trimmed 1" in out
    assert (tmp_path / "checkpoints.db").exists() and (tmp_path / "jobs.db").exists()
    assert main([*base, "--dry-run", "--json", "--now", str(NOW_S)]) == 0
    assert json.loads(capsys.readouterr().out)["tables"]["item"]["rows_trimmed"] == 0  # done already
    assert (
        main(
            [
                "retention",
                "set",
                "--app",
                "tests.retention.toy:plain",
                "--wide-store",
                sqlite_url(db),
                "--tenant",
                "o2",
                "--table",
                "*",
                "--days",
                "1",
            ]
        )
        == 0
    )
    assert "tenant o2 keeps * 1 days" in capsys.readouterr().out
    assert main([*base, "--dry-run", "--json", "--now", str(NOW_S)]) == 0
    assert json.loads(capsys.readouterr().out)["tables"]["item"]["rows_deleted"] == 1


def test_cli_app_without_retention_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retention", "run", "--app", "tests.app.toy:toy_app", "--wide-store", "sqlite:///x.db"]) == 2
    assert "not a converge App" in capsys.readouterr().err
