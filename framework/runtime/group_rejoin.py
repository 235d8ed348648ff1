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
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.errors import KafkaError, for_code
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.group import LeaveGroupRequest

__all__ = ["leave_before_rejoin"]

log = logging.getLogger(__name__)

_MARK = "_converge_leaves_forgotten"


def leave_before_rejoin(coordinator: Any) -> bool:
    """Wrap ``coordinator`` (aiokafka's ``GroupCoordinator``) once; False when it is not one."""
    reset = getattr(coordinator, "reset_generation", None)
    rejoin = getattr(coordinator, "_do_rejoin_group", None)
    if reset is None or rejoin is None:
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
        while forgotten:
            await _leave(coordinator, forgotten[0])
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

    coordinator.reset_generation = reset_generation
    coordinator._do_rejoin_group = do_rejoin_group  # noqa: SLF001 - the join step of aiokafka
    setattr(coordinator, _MARK, True)
    return True


async def _leave(coordinator: Any, member: str) -> None:
    group = coordinator.group_id
    try:
        response = await coordinator._send_req(LeaveGroupRequest(group, member))  # noqa: SLF001
    except KafkaError as exc:
        log.warning("group %r: could not remove the forgotten member %s before rejoining: %r",
                    group, member, exc)  # fmt: skip
        return
    error = for_code(response.error_code)
    if response.error_code == 0:
        log.warning("group %r: removed member %s, forgotten after a generation reset, before rejoining",
                    group, member)  # fmt: skip
    else:  # UnknownMemberId: the broker had already dropped it (it left, or a real broker evicted it)
        log.info("group %r: forgotten member %s not removed: %s", group, member, error.__name__)
