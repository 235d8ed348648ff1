"""The job coordinator's rules on both lock backends (SQLite lease, real ZooKeeper), in one process.

Each coordinator gets its own backend connection, as separate processes would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from framework.coordination import (
    CheckpointStore,
    DomainLocks,
    JobLockError,
    LastRunner,
    LastRunnerConflict,
    LeaseLost,
    LocksUnavailable,
    open_checkpoint_store,
    open_domain_locks,
)
from framework.jobs import CoordinatorSettings, JobCoordinator, TurnLost
from framework.local_stack import free_port
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]

CYCLE = {"A": "C", "B": "A", "C": "B"}
Opener = Callable[[], DomainLocks]


@pytest.fixture(params=["sqlite", "zookeeper"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(lock URL, checkpoint URL) of a fresh SQLite file or a fresh ZooKeeper root."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/jobs.db", f"sqlite:///{tmp_path}/jobs.db"
    server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    root = f"converge-test/{uuid.uuid4().hex}"
    return f"zookeeper://{server.hosts}/{root}/jobs", f"zookeeper://{server.hosts}/{root}/cp"


@pytest.fixture()
def open_locks(urls: tuple[str, str]) -> Iterator[Opener]:
    """Opens another connection to the same lock backend (another process's view)."""
    opened: list[DomainLocks] = []

    def _open() -> DomainLocks:
        opened.append(open_domain_locks(urls[0], lease=2.0, session_timeout=2.0))
        return opened[-1]

    yield _open
    for locks in opened:
        locks.close()


@pytest.fixture()
def checkpoints(urls: tuple[str, str]) -> Iterator[CheckpointStore]:
    store = open_checkpoint_store(urls[1])
    yield store
    store.close_sync()  # type: ignore[attr-defined]


def _cycle(open_locks: Opener, checkpoints: CheckpointStore | None = None) -> dict[str, JobCoordinator]:
    settings = {job: CoordinatorSettings("orders", job, CYCLE[job], start_with="A") for job in CYCLE}
    return {job: JobCoordinator(open_locks(), s, checkpoints=checkpoints) for job, s in settings.items()}


async def test_first_turn_belongs_to_start_with_then_the_cycle(
    open_locks: Opener, checkpoints: CheckpointStore
) -> None:
    jobs = _cycle(open_locks, checkpoints)
    order: list[tuple[int, str]] = []
    for _ in range(9):  # at least one turn per pass
        for job in "CBA":  # every job tries every round; only the expected one runs
            async with jobs[job].turn() as turn:
                if turn:
                    order.append((turn.round, job))
                    turn.commit(f"{job}-{turn.round}")
                elif job in "BC" and turn.previous is None:
                    assert "waiting for A to start the cycle" in turn.reason
    assert len(order) >= 9 and [r for r, _ in order] == list(range(1, len(order) + 1))
    assert [job for _, job in order] == ["ABC"[i % 3] for i in range(len(order))]
    b_rounds = [r for r, job in order if job == "B"]
    assert (await checkpoints.get("coordinator/orders/B")).value == f"B-{b_rounds[-1]}"  # type: ignore[union-attr]
    last = jobs["A"].locks.last_runner("orders")
    assert last is not None and (last.job, last.round, last.state) == (order[-1][1], len(order), "done")


async def test_a_held_lock_gives_the_round_up(open_locks: Opener) -> None:
    other = open_locks()
    a = JobCoordinator(open_locks(), CoordinatorSettings("orders", "A", "C", start_with="A"))
    lease = other.try_acquire("orders", "intruder@x:1")
    assert lease is not None and other.try_acquire("orders", "second@x:2") is None
    async with a.turn() as turn:
        assert not turn and "locked by another job" in turn.reason
    assert other.status("orders").holders[0] == "intruder@x:1"
    other.release(lease)
    async with a.turn() as turn:
        assert turn and turn.round == 1
        assert a.locks.status("orders").holders[0] == a.holder


async def test_a_failed_batch_keeps_the_checkpoint_and_hands_the_turn_on(
    open_locks: Opener, checkpoints: CheckpointStore
) -> None:
    jobs = _cycle(open_locks, checkpoints)
    await jobs["A"].run_round(_commit("a1"))
    await jobs["B"].run_round(_commit("b1"))
    with pytest.raises(RuntimeError, match="batch failed"):
        async with jobs["C"].turn() as turn:
            assert turn
            turn.commit("never written")
            raise RuntimeError("batch failed")
    last = jobs["A"].locks.last_runner("orders")
    assert last is not None and (last.job, last.round, last.state) == ("C", 3, "failed")
    assert await checkpoints.get("coordinator/orders/C") is None
    assert jobs["A"].locks.status("orders").holders == []  # released
    assert (await jobs["A"].run_round(_commit("a2"))).round == 4  # the order is of turns
    await jobs["B"].run_round(_commit("b2"))
    turn = await jobs["C"].run_round(_commit("c1"))
    assert turn.round == 6 and turn.checkpoint is not None and turn.checkpoint.value == "c1"


def _commit(value: str) -> Callable[..., object]:
    async def batch(turn: object) -> str:
        return value

    return batch


def test_sync_api(open_locks: Opener, checkpoints: CheckpointStore) -> None:
    jobs = _cycle(open_locks, checkpoints)
    assert not jobs["B"].run_round_sync(lambda t: "x")
    with jobs["A"].turn_sync() as turn:
        assert turn and turn.checkpoint is None and turn.held()
        turn.commit("7")
    seen = []
    turn = jobs["B"].run_round_sync(lambda t: seen.append(t.round) or None)  # type: ignore[func-returns-value]
    assert turn and seen == [2] and turn.checkpoint is None  # None from the batch: no checkpoint
    with jobs["C"].turn_sync():
        pass
    with jobs["A"].turn_sync() as turn:
        assert turn.round == 4 and turn.checkpoint is not None and turn.checkpoint.value == "7"


async def test_an_unordered_job_only_excludes(open_locks: Opener) -> None:
    solo = JobCoordinator(open_locks(), CoordinatorSettings("compaction", "compact", predecessor=None))
    rounds = [(await solo.run_round(_commit_none)).round for _ in range(3)]
    assert rounds == [1, 2, 3]


async def _commit_none(turn: object) -> None:
    return None


async def test_a_job_that_lost_its_lock_writes_no_checkpoint(
    open_locks: Opener, checkpoints: CheckpointStore
) -> None:
    jobs = _cycle(open_locks, checkpoints)
    thief = open_locks()
    with pytest.raises(TurnLost):
        async with jobs["A"].turn() as turn:
            assert turn
            jobs["A"].locks.release(turn.lease)  # as if its session or lease expired
            assert thief.try_acquire("orders", "thief@x:1") is not None
            assert not turn.held()
            turn.commit("stale")
    assert await checkpoints.get("coordinator/orders/A") is None


def test_the_last_runner_swap_is_fenced_by_the_lock(open_locks: Opener) -> None:
    mine, other = open_locks(), open_locks()
    lease = mine.try_acquire("orders", "A@x:1")
    assert lease is not None
    record = LastRunner("A", 1, "started", "A@x:1", time.time())
    stored = mine.swap_last_runner(lease, record, None)
    assert stored.version == 0 and other.last_runner("orders") == stored
    with pytest.raises(LastRunnerConflict):
        mine.swap_last_runner(lease, record, None)
    with pytest.raises(LastRunnerConflict):
        mine.swap_last_runner(lease, record, 5)
    mine.release(lease)
    taken = other.try_acquire("orders", "B@x:2")
    assert taken is not None
    with pytest.raises(LeaseLost):
        mine.swap_last_runner(lease, LastRunner("A", 2, "started", "A@x:1", time.time()), 0)
    assert other.last_runner("orders") == stored
    assert other.swap_last_runner(taken, LastRunner("B", 2, "started", "B@x:2", 0.0), 0).version == 1


def test_status_lists_domains_members_and_the_holder(open_locks: Opener) -> None:
    jobs = _cycle(open_locks)
    for job in "AB":
        jobs[job].run_round_sync(lambda t: None)
    locks = open_locks()
    assert "orders" in locks.domains()
    status = locks.status("orders")
    # a job is a member from its first round on
    members = [(m.job, m.predecessor, m.start_with) for m in status.members]
    assert members == [("A", "C", "A"), ("B", "A", "A")]
    assert status.last is not None and (status.last.job, status.last.round) == ("B", 2)
    assert status.holders == []
    with jobs["C"].turn_sync() as turn:
        assert turn and locks.status("orders").holders[0] == jobs["C"].holder
    assert [m.job for m in locks.status("orders").members] == ["A", "B", "C"]


def test_sqlite_lease_expires_when_its_holder_stops_renewing(tmp_path: Path) -> None:
    from framework.coordination.sqlite import SqliteDomainLocks

    holder = SqliteDomainLocks(tmp_path / "j.db", lease=1.5)
    other = SqliteDomainLocks(tmp_path / "j.db", lease=1.5)
    try:
        lease = holder.try_acquire("orders", "A@x:1")
        assert lease is not None
        time.sleep(2.0)  # longer than the lease: the holder renews it every 0.5 s
        assert holder.held(lease) and other.try_acquire("orders", "B@x:2") is None
        holder._stop.set()  # the holder stops renewing, as a killed process would
        holder._renewer.join()
        time.sleep(1.6)
        assert other.status("orders").expired == "A@x:1" and not holder.held(lease)
        assert other.try_acquire("orders", "B@x:2") is not None
        assert not holder.renew(lease)
    finally:
        holder.close()
        other.close()


def test_names_and_urls_are_checked(tmp_path: Path) -> None:
    for bad in ("a/b", "", ".", "x" * 101, "with space"):
        with pytest.raises(JobLockError):
            CoordinatorSettings(bad, "job", None)
        with pytest.raises(JobLockError):
            CoordinatorSettings("domain", bad, None)
    with pytest.raises(JobLockError):
        CoordinatorSettings("domain", "job", "../up")
    for url in ("nothing", "redis://x", "zookeeper:///root", "sqlite://relative"):
        with pytest.raises(JobLockError):
            open_domain_locks(url)
    with pytest.raises(ValueError):
        open_domain_locks(f"sqlite:///{tmp_path}/j.db", lease=0)


def test_an_unreachable_ensemble_is_unavailable_not_a_hang() -> None:
    from framework.coordination.zookeeper import ZooKeeperDomainLocks

    with pytest.raises(LocksUnavailable):
        ZooKeeperDomainLocks(f"127.0.0.1:{free_port()}", connect_timeout=1.0)


def test_zookeeper_going_away_ends_the_turn_without_a_checkpoint(tmp_path: Path) -> None:
    from framework.coordination.sqlite import SqliteCheckpointStore
    from framework.coordination.zookeeper import ZooKeeperDomainLocks

    server = ZooKeeperServer(tmp_path / "zk").start()
    locks = ZooKeeperDomainLocks(server.hosts, root="/gone", session_timeout=2.0)
    store = SqliteCheckpointStore(tmp_path / "cp.db")
    job = JobCoordinator(locks, CoordinatorSettings("orders", "A", None), checkpoints=store)
    try:
        with pytest.raises(TurnLost), job.turn_sync() as turn:
            assert turn
            server.stop()
            deadline = time.monotonic() + 30
            while turn.held() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not turn.held()
            turn.commit("1")
        assert store.get_sync("coordinator/orders/A") is None
        with pytest.raises(LocksUnavailable):
            job.run_round_sync(lambda t: "2")
    finally:
        locks.close()
        store.close_sync()
        server.stop()
