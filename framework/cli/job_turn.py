"""What one turn of a coordinated job opens from its flags (``converge retention run``,
``converge idmap run``): the checkpoint store, the job locks, the index and the clock; and the
aggregates' target (``aggregate_targets``, also ``converge erase``'s)."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from framework.cli.common import UserError, checkpoints_url, locks_url

__all__ = ["JobTurn", "job_turn", "aggregate_targets"]


def aggregate_targets(app: Any, settings: Any, store: Any) -> tuple[Any, Any]:
    """``(announcer, contributions)``: the app's aggregates' contributions in ``store``, their changed
    groups announced on the broker for the workers' totals; ``(None, None)`` without aggregates."""
    if not app.aggregates:
        return None, None
    from framework.aggregates.announce import KafkaAnnouncer
    from framework.aggregates.contributions import ContributionIndex

    announcer = KafkaAnnouncer(settings.broker, app.group_topic, settings.partitions)
    return announcer, ContributionIndex(store, app.aggregates, announcer)


@dataclass(frozen=True)
class JobTurn:
    """The parts of a turn; ``index`` is None when no ``--es-url`` is given and the app has no
    aggregates (with aggregates it routes their aliases to their contributions)."""

    checkpoints: Any
    locks: Any
    index: Any
    clock: Callable[[], float]


@asynccontextmanager
async def job_turn(args: argparse.Namespace, settings: Any, app: Any, store: Any) -> AsyncIterator[JobTurn]:
    """Open the turn's parts from ``--checkpoints``, ``--locks``, ``--es-url`` and ``--now``; close
    them afterwards. UserError when the app has projections and no index is given."""
    from framework.coordination import open_checkpoint_store
    from framework.coordination.open import open_domain_locks
    from stores.open import open_search_index

    if app.projections and settings.es_url is None:
        raise UserError(
            "--es-url: the app has projections: give the index their documents are re-projected into"
        )
    async with AsyncExitStack() as parts:
        cp_url = checkpoints_url(settings.wide_store, args.checkpoints)
        checkpoints = await asyncio.to_thread(open_checkpoint_store, cp_url)
        parts.push_async_callback(checkpoints.close)
        locks = await asyncio.to_thread(open_domain_locks, locks_url(settings.wide_store, args.locks))
        parts.push_async_callback(asyncio.to_thread, locks.close)
        index = None
        if settings.es_url is not None:
            index = open_search_index(settings.es_url, settings.es_tombstones)
            parts.push_async_callback(index.close)
        announcer, contributions = aggregate_targets(app, settings, store)
        if announcer is not None:
            from framework.aggregates.targets import ViewTargets

            parts.push_async_callback(announcer.close)
            index = ViewTargets(index, contributions)
        clock = time.time if args.now is None else (lambda: args.now)
        yield JobTurn(checkpoints, locks, index, clock)
