"""The job coordinator: independent jobs writing one resource take turns, one at a time, in a declared order.

Three settings: the lock ``domain`` (the resource, e.g. a table), the ``job``'s
name and its ``predecessor``. Per micro-batch (a round) the coordinator:

1. tries the domain's lock without waiting; when it is held the round is
   given up (the turn is falsy);
2. reads the domain's last runner; when it is not the predecessor, releases
   the lock and gives the round up: the job retries next round from its last
   checkpoint;
3. records itself as last runner (compare-and-swap, fenced by the lock),
   reads its checkpoint, and lets the batch run;
4. after the batch: writes the checkpoint the batch committed, marks its
   turn ``done`` (``failed`` when the batch raised) and releases the lock.

The first turn of a domain where nobody ran yet belongs to the job that
``start_with`` names (every job of a cycle should name the same one). A job
with ``predecessor=None`` is not ordered: it runs whenever it gets the lock.

Order is an order of turns: a turn counts from the moment it is recorded, so
a turn that fails, or whose process is killed, still hands the next turn to
the successor; the failed job re-runs its input from its checkpoint at its
own next turn. A holder that dies keeps the lock until its ZooKeeper
session or SQLite lease expires, then the others go on.

Usage::

    coordinator = JobCoordinator(locks, CoordinatorSettings("activity", "retention",
                                 predecessor="ingest", start_with="ingest"), checkpoints=store)
    async with coordinator.turn() as turn:
        if turn:                       # our turn: the lock is held, the order checked
            offset = int(turn.checkpoint.value) if turn.checkpoint else 0
            ...                        # run the micro-batch from offset
            turn.commit(str(new_offset))

or ``await coordinator.run_round(batch)`` with ``batch(turn)`` returning the new
checkpoint (or None); ``turn_sync`` and ``run_round_sync`` for blocking code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from framework.coordination.checkpoints import Checkpoint, CheckpointStore
from framework.coordination.locks import (
    DomainLocks,
    LastRunner,
    LastRunnerConflict,
    Lease,
    LeaseLost,
    Member,
    check_job_name,
    default_holder_id,
)
from framework.core.errors import Transient

__all__ = ["CoordinatorSettings", "JobCoordinator", "Turn", "TurnLost", "checkpoint_name"]


class TurnLost(Transient):
    """The turn's lock was lost before it finished (session or lease expired); no checkpoint was written."""


def checkpoint_name(domain: str, job: str) -> str:
    """The checkpoint a coordinator keeps for ``job`` in ``domain``: ``coordinator/DOMAIN/JOB``."""
    return f"coordinator/{domain}/{job}"


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    """One job's place in a lock domain.

    ``predecessor``: the job whose turn must come right before this job's
    (None: unordered). ``start_with``: the job that takes the first turn
    when nobody ran in the domain yet. ``holder``: this process's id in
    status output (default ``JOB@HOST:PID``).
    """

    domain: str
    job: str
    predecessor: str | None
    start_with: str | None = None
    holder: str | None = None

    def __post_init__(self) -> None:
        check_job_name(self.domain, "domain")
        check_job_name(self.job, "job")
        for name, value in (("predecessor", self.predecessor), ("start_with", self.start_with)):
            if value is not None:
                check_job_name(value, name)


@dataclass(slots=True)
class Turn:
    """One round of a job: truthy when the job got its turn (lock held, order checked, turn recorded).

    ``previous``: the last runner before this turn; ``record``: this turn's
    record (``record.round`` numbers the domain's turns and serves as a
    fencing token); ``checkpoint``: the job's last checkpoint; ``reason``:
    why a falsy turn was given up.
    """

    settings: CoordinatorSettings
    acquired: bool
    reason: str = ""
    previous: LastRunner | None = None
    record: LastRunner | None = None
    checkpoint: Checkpoint | None = None
    lease: Lease | None = field(default=None, repr=False)
    pending: str | None = field(default=None, repr=False)
    _coordinator: JobCoordinator | None = field(default=None, repr=False)

    def __bool__(self) -> bool:
        return self.acquired

    @property
    def round(self) -> int:
        """The domain's turn number of this turn (0 when the turn was given up)."""
        return 0 if self.record is None else self.record.round

    def commit(self, value: str) -> None:
        """The checkpoint to write when the batch ends without an exception (the last call wins)."""
        if not self.acquired:
            raise RuntimeError("not this job's turn: nothing to checkpoint")
        if self._coordinator is None or self._coordinator.checkpoints is None:
            raise RuntimeError("the coordinator has no checkpoint store")
        self.pending = value

    def held(self) -> bool:
        """Whether the lock is still held (a long batch may check it between steps)."""
        return (
            self.lease is not None
            and self._coordinator is not None
            and self._coordinator.locks.held(self.lease)
        )


class JobCoordinator:
    """Turns of one job in one lock domain on ``locks``; checkpoints in ``checkpoints`` (optional)."""

    def __init__(
        self,
        locks: DomainLocks,
        settings: CoordinatorSettings,
        *,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.locks = locks
        self.settings = settings
        self.checkpoints = checkpoints
        self.holder = settings.holder or default_holder_id(settings.job)
        self.checkpoint_name = checkpoint_name(settings.domain, settings.job)
        self._declared = False

    def may_run_after(self, last: LastRunner | None) -> bool:
        """Whether this job's turn comes after ``last`` (None: nobody ran in the domain yet)."""
        s = self.settings
        if s.predecessor is None:
            return True
        if last is None:
            return s.start_with == s.job
        return last.job == s.predecessor

    def _begin(self) -> Turn:
        """Steps 1-3 without the checkpoint read: a truthy Turn holds the lock and is recorded."""
        s = self.settings
        if not self._declared:
            self.locks.declare(s.domain, Member(s.job, s.predecessor, s.start_with))
            self._declared = True
        lease = self.locks.try_acquire(s.domain, self.holder)
        if lease is None:
            return Turn(s, False, reason=f"domain {s.domain!r} is locked by another job")
        try:
            last = self.locks.last_runner(s.domain)
            if not self.may_run_after(last):
                expected = s.predecessor if last is not None else f"{s.start_with or '?'} to start the cycle"
                ran = "nobody" if last is None else f"{last.job} (round {last.round})"
                self.locks.release(lease)
                return Turn(s, False, reason=f"waiting for {expected}; last ran: {ran}", previous=last)
            record = LastRunner(
                job=s.job,
                round=1 if last is None else last.round + 1,
                state="started",
                holder=self.holder,
                at=time.time(),
            )
            try:
                stored = self.locks.swap_last_runner(lease, record, None if last is None else last.version)
            except (LastRunnerConflict, LeaseLost) as exc:
                self.locks.release(lease)
                return Turn(s, False, reason=f"turn lost before it started: {exc}", previous=last)
        except BaseException:
            self.locks.release(lease)
            raise
        return Turn(s, True, previous=last, record=stored, lease=lease, _coordinator=self)

    def _finish(self, turn: Turn, failed: bool) -> None:
        """Step 4 after the checkpoint: mark the turn done or failed, release the lock."""
        assert turn.lease is not None and turn.record is not None
        try:
            final = LastRunner(
                turn.record.job, turn.record.round, "failed" if failed else "done", self.holder, time.time()
            )
            try:
                turn.record = self.locks.swap_last_runner(turn.lease, final, turn.record.version)
            except (LastRunnerConflict, LeaseLost) as exc:
                if not failed:
                    raise TurnLost(f"{self.settings.job}: {exc}") from exc
        finally:
            self.locks.release(turn.lease)

    def _check_still_held(self, turn: Turn) -> None:
        assert turn.lease is not None
        if not self.locks.held(turn.lease):
            self.locks.release(turn.lease)
            raise TurnLost(
                f"{self.settings.job}: lost the lock of domain {self.settings.domain!r} during round "
                f"{turn.round}; checkpoint not written"
            )

    def _abort(self, turn: Turn) -> None:
        """Release a turn whose start failed after it was recorded."""
        with contextlib.suppress(Exception):
            self._finish(turn, failed=True)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[Turn]:
        """One round (async): yields a Turn, truthy when the batch may run; see the module docstring."""
        turn = await asyncio.to_thread(self._begin)
        if not turn:
            yield turn
            return
        try:
            if self.checkpoints is not None:
                turn.checkpoint = await self.checkpoints.get(self.checkpoint_name)
        except BaseException:
            await asyncio.to_thread(self._abort, turn)
            raise
        try:
            yield turn
        except BaseException:
            await asyncio.to_thread(self._finish, turn, True)
            raise
        if turn.pending is not None and self.checkpoints is not None:
            try:
                await asyncio.to_thread(self._check_still_held, turn)
                expected = None if turn.checkpoint is None else turn.checkpoint.version
                turn.checkpoint = await self.checkpoints.compare_and_set(
                    self.checkpoint_name, turn.pending, expected
                )
            except TurnLost:
                raise
            except BaseException:
                await asyncio.to_thread(self._finish, turn, True)
                raise
        await asyncio.to_thread(self._finish, turn, False)

    @contextlib.contextmanager
    def turn_sync(self) -> Iterator[Turn]:
        """One round (blocking), as ``turn``; the checkpoint store needs its ``*_sync`` methods."""
        turn = self._begin()
        if not turn:
            yield turn
            return
        store = self.checkpoints
        try:
            if store is not None:
                turn.checkpoint = store.get_sync(self.checkpoint_name)  # type: ignore[attr-defined]
        except BaseException:
            self._abort(turn)
            raise
        try:
            yield turn
        except BaseException:
            self._finish(turn, True)
            raise
        if turn.pending is not None and store is not None:
            try:
                self._check_still_held(turn)
                expected = None if turn.checkpoint is None else turn.checkpoint.version
                turn.checkpoint = store.compare_and_set_sync(  # type: ignore[attr-defined]
                    self.checkpoint_name, turn.pending, expected
                )
            except TurnLost:
                raise
            except BaseException:
                self._finish(turn, True)
                raise
        self._finish(turn, False)

    async def run_round(self, batch: Callable[[Turn], Awaitable[str | None]]) -> Turn:
        """One round: ``await batch(turn)`` on this job's turn; a non-None result is the checkpoint."""
        async with self.turn() as turn:
            if turn:
                value = await batch(turn)
                if value is not None:
                    turn.commit(value)
        return turn

    def run_round_sync(self, batch: Callable[[Turn], str | None]) -> Turn:
        """One round (blocking): ``batch(turn)`` on this job's turn; a non-None result is the checkpoint."""
        with self.turn_sync() as turn:
            if turn:
                value = batch(turn)
                if value is not None:
                    turn.commit(value)
        return turn
