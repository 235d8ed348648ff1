"""One contract for the job checkpoint store on every backend: SQLite and a real ZooKeeper.

Each test runs once per backend (``backend`` is parametrised); ``reopen``
opens a second connection, as a second run of the job would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.coordination.zookeeper import ZooKeeperCheckpointStore
from framework.jobs.batches import (
    Batch,
    BatchInput,
    JobCheckpointError,
    JobCheckpoints,
    JobFenced,
    OffsetRange,
)
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]

PROCESSES = ("store", "notifications", "index")
Opener = Callable[[], CheckpointStore]


@pytest.fixture(params=["sqlite", "zookeeper"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another connection to one fresh backend location (SQLite file or ZooKeeper root)."""
    opened: list[CheckpointStore] = []
    if request.param == "sqlite":
        path = tmp_path / "checkpoints.db"

        def _open() -> CheckpointStore:
            return SqliteCheckpointStore(path)

    else:
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        root = f"/converge-jobs-test/{uuid.uuid4().hex}"

        def _open() -> CheckpointStore:
            return ZooKeeperCheckpointStore(server.hosts, root=root)

    def opener() -> CheckpointStore:
        opened.append(_open())
        return opened[-1]

    yield opener
    for store in opened:
        store.close_sync()  # type: ignore[attr-defined]


def _input(*ends: int, topic: str = "t", start: tuple[int, ...] = ()) -> BatchInput:
    starts = start or (0,) * len(ends)
    return BatchInput(
        ranges=tuple(OffsetRange(topic, p, s, e) for p, (s, e) in enumerate(zip(starts, ends, strict=True)))
    )


async def test_a_new_job_has_no_batch_and_nothing_lags(reopen: Opener) -> None:
    state = await JobCheckpoints(reopen(), "ingest", PROCESSES).state()
    assert state.batch is None and state.complete
    assert state.done == {p: None for p in PROCESSES}


async def test_a_batch_is_recorded_before_it_runs_and_survives_a_reconnect(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "ingest", PROCESSES)
    await job.state()
    batch = await job.begin(_input(5, 7), began_at=123)
    assert batch == Batch(1, _input(5, 7), 123)
    again = await JobCheckpoints(reopen(), "ingest", PROCESSES).state()
    assert again.batch == batch
    assert again.lagging() == PROCESSES


async def test_each_process_records_its_own_completion(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "ingest", PROCESSES)
    batch = await job.begin(_input(3), began_at=1)
    await job.complete("store", batch)
    seen = await JobCheckpoints(reopen(), "ingest", PROCESSES).state()
    assert seen.done == {"store": 1, "notifications": None, "index": None}
    assert seen.lagging() == ("notifications", "index")
    await job.complete("index", batch)
    await job.complete("notifications", batch)
    done = await JobCheckpoints(reopen(), "ingest", PROCESSES).state()
    assert done.complete and done.done == dict.fromkeys(PROCESSES, 1)


async def test_the_next_batch_waits_for_every_process(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "ingest", PROCESSES)
    first = await job.begin(_input(3), began_at=1)
    await job.complete("store", first)
    with pytest.raises(JobCheckpointError, match="not complete in notifications, index"):
        await job.begin(_input(6, start=(3,)), began_at=2)
    for p in ("notifications", "index"):
        await job.complete(p, first)
    second = await job.begin(_input(6, start=(3,)), began_at=2)
    assert second.batch_id == 2 and second.input.ends() == {("t", 0): 6}
    state = await JobCheckpoints(reopen(), "ingest", PROCESSES).state()
    assert state.batch == second and state.lagging() == PROCESSES and state.done["store"] == 1


async def test_a_process_completes_a_batch_once_and_only_the_current_one(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "ingest", PROCESSES)
    batch = await job.begin(_input(3), began_at=1)
    await job.complete("store", batch)
    with pytest.raises(JobCheckpointError, match="already completed"):
        await job.complete("store", batch)
    with pytest.raises(JobCheckpointError, match="not the current batch"):
        await job.complete("index", Batch(7, batch.input, 1))
    with pytest.raises(JobCheckpointError, match="no process"):
        await job.complete("elsewhere", batch)


async def test_a_second_run_of_the_job_fences_the_first(reopen: Opener) -> None:
    first = JobCheckpoints(reopen(), "ingest", PROCESSES)
    batch = await first.begin(_input(3), began_at=1)
    second = JobCheckpoints(reopen(), "ingest", PROCESSES)
    await second.state()
    await second.complete("store", batch)
    with pytest.raises(JobFenced):
        await first.complete("store", batch)
    for p in ("notifications", "index"):
        await second.complete(p, batch)
    stale = JobCheckpoints(reopen(), "ingest", PROCESSES)
    await stale.state()
    await second.begin(_input(4, start=(3,)), began_at=2)
    with pytest.raises(JobFenced):
        await stale.begin(_input(9, start=(3,)), began_at=3)
    assert (await JobCheckpoints(reopen(), "ingest", PROCESSES).state()).batch.input.ends() == {("t", 0): 4}  # type: ignore[union-attr]


async def test_jobs_are_independent(reopen: Opener) -> None:
    store = reopen()
    a = JobCheckpoints(store, "a", PROCESSES)
    b = JobCheckpoints(store, "b", ("store",))
    batch = await a.begin(_input(2), began_at=1)
    await a.complete("store", batch)
    assert (await b.state()).batch is None
    assert (await a.state()).done["store"] == 1


async def test_a_file_set_input_round_trips(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "files", ("store",))
    files = BatchInput(files=("in/a.jsonl", "in/b.jsonl"))
    batch = await job.begin(files, began_at=5)
    assert (await JobCheckpoints(reopen(), "files", ("store",)).state()).batch == batch
    assert not files.empty and BatchInput(ranges=(OffsetRange("t", 0, 4, 4),)).empty


async def test_a_process_added_later_lags_the_current_batch_only(reopen: Opener) -> None:
    job = JobCheckpoints(reopen(), "grow", ("store",))
    batch = await job.begin(_input(2), began_at=1)
    await job.complete("store", batch)
    grown = await JobCheckpoints(reopen(), "grow", ("store", "index")).state()
    assert grown.lagging() == ("index",)


async def test_malformed_or_impossible_checkpoints_are_errors_not_guesses(reopen: Opener) -> None:
    store = reopen()
    await store.compare_and_set("jobs/bad/batch", "{not json", None)
    with pytest.raises(JobCheckpointError, match="malformed batch"):
        await JobCheckpoints(store, "bad", ("store",)).state()
    job = JobCheckpoints(store, "ahead", ("store",))
    await job.begin(_input(1), began_at=1)
    await store.compare_and_set("jobs/ahead/done/store", '{"batch_id": 5}', None)
    with pytest.raises(JobCheckpointError, match="after the current 1"):
        await JobCheckpoints(store, "ahead", ("store",)).state()


def test_declarations_are_checked() -> None:
    store = SqliteCheckpointStore(":memory:")
    try:
        for job, procs in (("a b", ("s",)), ("a", ()), ("a", ("s", "s")), ("a", ("x/../y",))):
            with pytest.raises(ValueError):
                JobCheckpoints(store, job, procs)
    finally:
        store.close_sync()
    with pytest.raises(ValueError):
        OffsetRange("t", 0, 5, 4)
    with pytest.raises(ValueError):
        BatchInput(ranges=(OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2)))
    with pytest.raises(ValueError):
        BatchInput(ranges=(OffsetRange("t", 0, 0, 1),), files=("f",))
