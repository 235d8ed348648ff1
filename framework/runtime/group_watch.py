"""A worker's view of its consumer group from the broker: lag, stalls and dead members.

``GroupWatch`` reads the group every ``period`` seconds (``kafka_admin.GroupReader``):
the end offset of every partition of the worker's topics, the group's committed
offset there and who holds it, whoever that is. From successive readings it
keeps, per partition:

- the lag (end - committed; the whole log when nothing is committed);
- a stall: lag that has not shrunk by a commit for ``stall_after`` seconds
  (with or without an owner). A stall is logged when it starts, again every
  ``stall_after`` seconds while it lasts, and when it ends; ``stalls`` counts
  them and ``status()`` reports the stalled partitions and their seconds.

It also removes dead members. The embedded broker never evicts a member that
stopped heartbeating, so a worker killed with SIGKILL (or stopped in the
middle of a join) holds its partitions, or a rebalance, for ever. A worker's
consumer is named ``converge-<host>-<pid namespace>-<pid>``
(``member_client_id``); a member whose client id names this host, this pid
namespace (containers sharing a host name do not share one) and a process that
no longer exists is dead for certain and is removed with LeaveGroup, which is
logged and counted (``members_removed``). So is a member under this worker's
own client id other than the one its consumer is now, while that one is in
the group too: an id its consumer gave up (``group_rejoin`` removes those it
sees; this catches any other path). Any other member is left to the broker's
session timeout.

A watch runs from the start of the worker (``run_with``: a child service of the app), not as a
Faust app task: those start only once the tables are recovered, which waits for a first
assignment, and the only worker of a group restarted after a SIGKILL gets none while the dead
member it replaces holds the rebalance (noida-db waits for every member to rejoin). While the
group is not ``Stable`` (or nothing was read yet) it reads every ``rebalance_period`` seconds
(1 s), so that a dead member holding a join is removed within about a second.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mode

from framework.kafka_admin import GroupMember, GroupReader, GroupReading

__all__ = ["PartitionProgress", "GroupWatch", "member_client_id", "dead_here", "run_with"]

log = logging.getLogger(__name__)

_PREFIX = "converge-"


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # no /proc: one namespace
        return "0"


def _here(host: str | None) -> str:
    return f"{_PREFIX}{host or socket.gethostname()}-{_pid_namespace()}-"


def member_client_id(host: str | None = None, pid: int | None = None) -> str:
    """The client id a worker's consumer uses: ``converge-<host>-<pid namespace>-<pid>``."""
    return f"{_here(host)}{pid or os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def dead_here(client_id: str, host: str | None = None, alive: Callable[[int], bool] = _alive) -> bool:
    """True when ``client_id`` names a worker of ``host`` (default this one) and of this pid
    namespace whose process is gone."""
    head = _here(host)
    if not client_id.startswith(head):
        return False
    pid = client_id[len(head) :]
    return pid.isdigit() and not alive(int(pid))


@dataclass(frozen=True)
class PartitionProgress:
    """One partition as the broker sees it: end offset, the group's committed offset (None:
    none), the client id of the member holding it (None: no member) and the seconds since its
    lag last shrank while it has lag (0 when it has none)."""

    topic: str
    partition: int
    end: int
    committed: int | None
    owner: str | None
    stalled_s: float

    @property
    def lag(self) -> int:
        """Messages after the committed offset (the whole log when nothing is committed)."""
        return max(0, self.end - (self.committed or 0))


class GroupWatch:
    """Reads ``group``'s progress on ``topics`` (more with ``add_topic``) from ``broker`` every
    ``period`` seconds."""

    def __init__(
        self,
        broker: str,
        group: str,
        topics: Sequence[str] = (),
        *,
        period: float = 5.0,
        rebalance_period: float = 1.0,
        stall_after: float = 30.0,
        remove_dead: bool = True,
        own: Callable[[], tuple[str, str | None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group, self.period, self.stall_after = group, period, stall_after
        self.rebalance_period = min(period, rebalance_period)
        self.topics: list[str] = list(topics)
        self.remove_dead = remove_dead
        #: this worker's client id and its consumer's member id now (None: not known)
        self.own = own
        self.reader = GroupReader(broker, group)
        self.clock = clock
        self.state: str | None = None
        self.members: tuple[GroupMember, ...] = ()
        self.partitions: dict[tuple[str, int], PartitionProgress] = {}
        self.read_at: float | None = None
        self.stalls = 0  # stalls that started
        self.members_removed = 0
        self.read_errors = 0
        self._moved_at: dict[tuple[str, int], float] = {}  # when each partition's lag last shrank or was 0
        self._reported_at: dict[tuple[str, int], float] = {}  # when each ongoing stall was last logged
        self._stalls_by_topic: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def add_topic(self, topic: str) -> None:
        """Read ``topic`` too from the next reading on."""
        if topic not in self.topics:
            self.topics.append(topic)

    async def run(self) -> None:
        """Read until cancelled, every ``period`` seconds, every ``rebalance_period`` while the group
        is not Stable; a failed reading is logged and retried at the next period."""
        try:
            while True:
                try:
                    await self.step()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - the broker may be restarting: try again later
                    self.read_errors += 1
                    log.warning("group %r: could not read the group's progress from the broker: %r",
                                self.group, exc)  # fmt: skip
                    await self.reader.close()
                await asyncio.sleep(self.period if self.state == "Stable" else self.rebalance_period)
        finally:
            await self.reader.close()

    async def step(self) -> None:
        """One reading: update lags and stalls, remove dead members."""
        async with self._lock:
            reading = await self.reader.read(list(self.topics))
            self.observe(reading)
            if self.remove_dead:
                await self._remove_dead(reading)

    async def fresh(self, max_age: float) -> None:
        """Read now unless the last reading is younger than ``max_age`` seconds (for a scrape);
        a failure is logged and the last reading kept."""
        if self.read_at is not None and self.clock() - self.read_at < max_age:
            return
        try:
            await self.step()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail on the broker
            self.read_errors += 1
            log.warning("group %r: could not read the group's progress from the broker: %r", self.group, exc)

    def observe(self, reading: GroupReading) -> None:
        """Take ``reading`` in: lags, stall start and end (logged), the current view."""
        now = self.clock()
        previous = self.partitions
        current: dict[tuple[str, int], PartitionProgress] = {}
        for tp, end in sorted(reading.ends.items()):
            committed = reading.committed.get(tp)
            member = reading.owner(*tp)
            owner = member.client_id if member is not None else None
            lag = max(0, end - (committed or 0))
            before = previous.get(tp)
            if lag == 0 or before is None or (committed or 0) > (before.committed or 0):
                self._moved_at[tp] = now
            stalled = now - self._moved_at.get(tp, now) if lag else 0.0
            current[tp] = PartitionProgress(tp[0], tp[1], end, committed, owner, stalled)
            self._report(current[tp], now, reading)
        self.partitions, self.state, self.members, self.read_at = current, reading.state, reading.members, now

    def _report(self, p: PartitionProgress, now: float, reading: GroupReading) -> None:
        tp = (p.topic, p.partition)
        stalled = p.stalled_s >= self.stall_after
        last = self._reported_at.get(tp)
        if not stalled:
            if last is not None:
                del self._reported_at[tp]
                log.warning("group %r: %s[%d] moves again (lag %d)", self.group, p.topic, p.partition, p.lag)
            return
        if last is None:
            self.stalls += 1
            self._stalls_by_topic[p.topic] = self._stalls_by_topic.get(p.topic, 0) + 1
        if last is None or now - last >= self.stall_after:
            self._reported_at[tp] = now
            log.error(
                "group %r: %s[%d] stalled: lag %d and no commit for %.0f s; held by %s; group %s with "
                "%d members", self.group, p.topic, p.partition, p.lag, p.stalled_s, p.owner or "no member",
                reading.state, len(reading.members),
            )  # fmt: skip

    async def _remove_dead(self, reading: GroupReading) -> None:
        client, current = self.own() if self.own is not None else ("", None)
        ids = {m.member_id for m in reading.members}
        for member in reading.members:
            if dead_here(member.client_id):
                why = "its process is gone and the broker kept it"
            elif member.client_id == client and current in ids and member.member_id != current:
                why = f"this worker is member {current} now and the broker kept the id it gave up"
            else:
                continue
            answer = await self.reader.remove_member(member.member_id)
            if answer == "NoError":
                self.members_removed += 1
                held = sum(map(len, member.holds.values()))
                log.warning("group %r: removed member %s (%s): %s (holding %d partitions, group %s)",
                            self.group, member.member_id, member.client_id, why, held,
                            reading.state)  # fmt: skip

    def status(self, topic: str | None = None) -> dict[str, Any]:
        """What the last reading found (for ``topic`` only when given): group state and members,
        the group's lag, the stalled partitions with their seconds, stalls and members removed
        so far (members of the whole group)."""
        mine = [p for p in self.partitions.values() if topic is None or p.topic == topic]
        stalled = {f"{p.topic}[{p.partition}]": round(p.stalled_s, 1)
                   for p in mine if p.stalled_s >= self.stall_after}  # fmt: skip
        return {
            "state": self.state,
            "members": len(self.members),
            "lag": sum(p.lag for p in mine),
            "stalled": stalled,
            "stalls": self.stalls if topic is None else self._stalls_by_topic.get(topic, 0),
            "members_removed": self.members_removed,
            "read_errors": self.read_errors,
            "age_s": None if self.read_at is None else round(self.clock() - self.read_at, 1),
        }


class _WatchService(mode.Service):
    """Runs a ``GroupWatch`` while the service runs."""

    def __init__(self, watch: GroupWatch, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.watch = watch

    async def on_start(self) -> None:
        self.add_future(self.watch.run())


def run_with(service: mode.ServiceT, watch: GroupWatch) -> None:
    """Run ``watch`` from the start of ``service`` (a Faust app) to its stop, as its child: started
    before the app's own children (its consumer among them), unlike an app task, which Faust starts
    only after table recovery."""
    service.add_dependency(_WatchService(watch))
