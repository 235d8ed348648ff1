"""A bounded wait for cluster metadata while the consumer joins its group.

The group leader waits for the metadata update its join asked for before it
assigns partitions. aiokafka waits for it without a bound; the update comes
from one background task of the client, so when it never comes the join never
ends (seen twice after a restart of the embedded broker: the leader logged its
election and waited there, the group stayed in CompletingRebalance with every
partition unowned until the worker stopped; why the update never came was not
caught).

``bound_metadata_wait`` wraps that wait: after ``timeout`` seconds it restarts
the client's metadata task if it has ended (logging why) and goes on with
the metadata at hand, which is what aiokafka does when no update is pending.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["bound_metadata_wait"]

log = logging.getLogger(__name__)

_MARK = "_converge_bounded_metadata_wait"


def bound_metadata_wait(client: Any, timeout: float) -> bool:
    """Wrap ``client._maybe_wait_metadata`` (aiokafka's ``AIOKafkaClient``) once; False when
    ``client`` has no such step."""
    if not hasattr(client, "_maybe_wait_metadata") or not hasattr(client, "_md_synchronizer"):
        return False
    if getattr(client, _MARK, False):
        return True

    async def maybe_wait_metadata() -> None:
        update = client._md_update_fut  # noqa: SLF001
        if update is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(update), timeout)
        except TimeoutError:
            task = client._sync_task  # noqa: SLF001
            if task is None or task.done():
                ended = "cancelled" if task is not None and task.cancelled() else None
                if task is not None and not task.cancelled():
                    ended = repr(task.exception())
                log.error("the consumer's metadata task had ended (%s): started again", ended)
                client._sync_task = asyncio.ensure_future(client._md_synchronizer())  # noqa: SLF001
            else:
                log.warning("no metadata update after %.0f s: going on with the metadata at hand", timeout)

    client._maybe_wait_metadata = maybe_wait_metadata  # noqa: SLF001
    setattr(client, _MARK, True)
    return True
