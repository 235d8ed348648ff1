"""Rejoining a consumer group without leaving a member behind.

When the broker answers a commit, heartbeat or sync with IllegalGeneration
or UnknownMemberId, aiokafka resets its generation: it forgets its member id
and joins again under a new one. A real Kafka broker drops the forgotten
member when its session times out; the embedded noida-db never does, so the
group keeps a member that will never join again and every later rebalance
waits for it (seen: a worker's commit answered IllegalGeneration while a
second worker joined, the worker rejoined as a third member, the group stayed
in PreparingRebalance until the broker was restarted).

``leave_before_rejoin`` changes two things in the consumer's coordinator.
Outside a join, a reset keeps the member id and only drops the generation,
so the consumer rejoins as the member the broker already counts (as the Java
client does after IllegalGeneration); a join answered UnknownMemberId or a
failed sync still forgets it. Every member id it forgets is then removed
with LeaveGroup before the next JoinGroup, so the group holds only live
members. Against a real broker both are what it expects anyway.

A sync that hands the member an assignment aiokafka cannot decode (seen once:
noida-db answered a second worker's SyncGroup with empty bytes; aiokafka's
coordinator task died on it and the group stayed in CompletingRebalance) now
ends that join attempt: the member joins again instead.

A consumer's close leaves the group whatever its state. aiokafka sends
LeaveGroup only with a generation, and a reset that kept the member id (above)
leaves none: that member stayed in the group, holding its partitions in the
next generation (seen: a worker stopped during a rebalance, its commits
answered IllegalGeneration, exited with its member in the Stable group). The
close now leaves under the member id whatever the generation, and every
forgotten id too. A close that waits on a join the broker holds (noida-db
answers a JoinGroup only once every member rejoined, also a dead one) leaves,
after ``RELEASE_S``, every member of its client id through a connection of its
own (``kafka_admin.leave_group``), which ends the join.

A worker that stops calls ``stop_joining``: from then on a rejoin (a commit of
the stop answered IllegalGeneration during a rebalance asks for one) leaves the
group instead. Before, the stopping worker joined the new generation and left
it a moment later, and the broker held the join of a worker starting at that
moment for its whole rebalance timeout (seen: 60 s, 1 of 5 tries).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.errors import KafkaError, for_code
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.group import LeaveGroupRequest

from framework.kafka_admin import leave_group

__all__ = ["leave_before_rejoin", "stop_joining", "RELEASE_S"]

log = logging.getLogger(__name__)

_MARK = "_converge_leaves_forgotten"

_STOPPING = "_converge_stopping"

#: Seconds a close waits on a join in flight before it leaves the group through its own connection.
RELEASE_S = 1.0


def stop_joining(coordinator: Any) -> None:
    """Make ``coordinator`` (wrapped by ``leave_before_rejoin``) leave the group instead of joining
    it again from now on: its worker stops."""
    if coordinator is not None:
        setattr(coordinator, _STOPPING, True)


def leave_before_rejoin(coordinator: Any) -> bool:
    """Wrap ``coordinator`` (aiokafka's ``GroupCoordinator``) once; False when it is not one."""
    reset = getattr(coordinator, "reset_generation", None)
    rejoin = getattr(coordinator, "_do_rejoin_group", None)
    leave = getattr(coordinator, "_maybe_leave_group", None)
    close = getattr(coordinator, "close", None)
    if reset is None or rejoin is None or leave is None or close is None:
        return False
    if getattr(coordinator, _MARK, False):
        return True
    forgotten: list[str] = []
    joining = False

    def reset_generation() -> None:
        member = coordinator.member_id
        if member and not joining:  # keep the id: rejoin as the member the broker counts
            coordinator.generation = OffsetCommitRequest.DEFAULT_GENERATION_ID
            coordinator.request_rejoin()
            return
        if member and member not in forgotten:
            forgotten.append(member)
        reset()

    async def do_rejoin_group(subscription: Any) -> Any:
        nonlocal joining
        if getattr(coordinator, _STOPPING, False):  # leave instead: the worker stops
            await maybe_leave_group()
            await asyncio.sleep(coordinator._retry_backoff_ms / 1000)  # noqa: SLF001 - until the close
            return False
        while forgotten:
            await _leave(coordinator, forgotten[0], "forgotten after a generation reset, before rejoining")
            forgotten.pop(0)
        joining = True
        try:
            return await rejoin(subscription)
        except ValueError as exc:  # the sync's assignment does not decode (noida-db: empty bytes)
            log.warning("group %r: member %s got an assignment it cannot read (%s): joining again",
                        coordinator.group_id, coordinator.member_id, exc)  # fmt: skip
            await asyncio.sleep(coordinator._retry_backoff_ms / 1000)  # noqa: SLF001
            return False
        finally:
            joining = False

    async def maybe_leave_group() -> None:
        member = coordinator.member_id
        if member and coordinator.generation <= 0 and coordinator._group_instance_id is None:  # noqa: SLF001
            await _leave(coordinator, member, "on leaving, without a generation")  # aiokafka would not
        else:
            await leave()
        while forgotten:
            await _leave(coordinator, forgotten.pop(0), "forgotten after a generation reset, on leaving")
        reset()  # forget the id and the generation

    async def close_coordinator() -> None:
        closing = asyncio.ensure_future(close())
        while not (await asyncio.wait({closing}, timeout=RELEASE_S))[0]:
            if joining:  # the close waits on a join's answer: leave, which ends the join
                await _release(coordinator)
                break
        await closing

    coordinator.reset_generation = reset_generation
    coordinator._do_rejoin_group = do_rejoin_group  # noqa: SLF001 - the join step of aiokafka
    coordinator._maybe_leave_group = maybe_leave_group  # noqa: SLF001 - its close's LeaveGroup
    coordinator.close = close_coordinator
    setattr(coordinator, _MARK, True)
    return True


async def _leave(coordinator: Any, member: str, why: str) -> None:
    group = coordinator.group_id
    try:
        response = await coordinator._send_req(LeaveGroupRequest(group, member))  # noqa: SLF001
    except KafkaError as exc:
        log.warning("group %r: could not remove member %s (%s): %r", group, member, why, exc)
        return
    error = for_code(response.error_code)
    if response.error_code == 0:
        log.warning("group %r: removed member %s, %s", group, member, why)
    else:  # UnknownMemberId: the broker had already dropped it (it left, or a real broker evicted it)
        log.info("group %r: member %s (%s) not removed: %s", group, member, why, error.__name__)


async def _release(coordinator: Any) -> None:
    """Leave the group as every member of this consumer's client id, through connections of their
    own (the coordinator's own waits on the join's answer)."""
    client = coordinator._client  # noqa: SLF001
    servers = client._bootstrap_servers  # noqa: SLF001
    broker = servers if isinstance(servers, str) else ",".join(servers)
    member = coordinator.member_id
    try:
        removed = await asyncio.wait_for(
            leave_group(broker, coordinator.group_id, client._client_id, [member] if member else []),  # noqa: SLF001
            timeout=10.0,
        )
    except (TimeoutError, KafkaError, OSError) as exc:
        log.warning("group %r: closing during a join: could not leave the group: %r",
                    coordinator.group_id, exc)  # fmt: skip
        return
    log.warning("group %r: closing during a join the broker holds: left as %s",
                coordinator.group_id, ", ".join(removed) or "no member")  # fmt: skip
