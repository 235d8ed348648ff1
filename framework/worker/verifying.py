"""The change verifier as a task of a worker (setting ``verify``: its settle time).

Started once the worker's resources are open and stopped before they close. It verifies with
the worker's store, index and aggregates' contributions, parks what it cannot repair in the
worker's dead-letter log, and keeps its checkpoint in the checkpoint store (``checkpoints``,
else ``checkpoints.db`` beside a SQLite store). Run it on one worker of an app: instances
share the consumer's checkpoint, and one that loses a commit to another retries its page.
With the setting ``verify_sweep``, the same task sweeps every view in full that often
(``framework.verify.sweep``), between two pages.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.app import App
from framework.coordination import open_checkpoint_store
from framework.core.repair_guard import parse_delete_bound
from framework.settings import Settings
from framework.verify import ChangeVerifier, VerifyStats
from framework.verify.assembly import app_sweep, app_verifier
from stores.base import SearchIndex
from stores.open import sqlite_beside

__all__ = ["WorkerVerifier", "checkpoints_of"]


def checkpoints_of(settings: Settings) -> str:
    """The checkpoint store URL of ``settings``: the setting, else beside a SQLite store."""
    url = settings.checkpoints or sqlite_beside(settings.wide_store, "checkpoints.db")
    if url is None:
        raise ValueError("verify: the store is not SQLite: set the checkpoint store (CONVERGE_CHECKPOINTS)")
    return url


class WorkerVerifier:
    """The verifier task of a worker of ``app`` (its notifications must be on)."""

    def __init__(self, app: App, settings: Settings) -> None:
        if app.notifications is None:
            raise ValueError(f"verify: app {app.name} records no notifications (App(notifications=True))")
        if settings.verify is None:
            raise ValueError("verify: no settle time (the verify setting)")
        self.app, self.settings = app, settings
        self.url = checkpoints_of(settings)
        self.verifier: ChangeVerifier | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._checkpoints: Any = None

    @property
    def stats(self) -> VerifyStats | None:
        """What the verifier did so far (None before it started)."""
        return None if self.verifier is None else self.verifier.stats

    async def start(
        self, store: Any, index: SearchIndex | None, contributions: SearchIndex, dlq: Any
    ) -> None:
        """Start verifying with the worker's open resources."""
        settle = float(self.settings.verify or 0)
        self._checkpoints = await asyncio.to_thread(open_checkpoint_store, self.url)
        self.verifier = await app_verifier(self.app, store, index, contributions, self._checkpoints, dlq,
                                           settle=settle, recheck=min(5.0, settle / 2))  # fmt: skip
        between = None
        if self.settings.verify_sweep is not None:
            bound = parse_delete_bound(self.settings.repair_max_deletes)
            sweep = await app_sweep(
                self.verifier, self.app, self._checkpoints, self.settings.verify_sweep, bound
            )
            between = sweep.when_due
        self._task = asyncio.create_task(
            self.verifier.run(self._stop, between=between), name="converge.verify"
        )

    async def stop(self) -> None:
        """Stop after the step under way (its page is verified again at the next start)."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self._checkpoints is not None:
            await self._checkpoints.close()
            self._checkpoints = None
