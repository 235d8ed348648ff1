"""The in-worker verification timer."""

from __future__ import annotations

import logging

import faust

from framework.delivery.verifier import Verifier

__all__ = ["register_verifier_timer"]

log = logging.getLogger(__name__)


def register_verifier_timer(
    app: faust.App, verifier: Verifier, *, interval: float = 600.0, on_leader: bool = True
) -> None:
    """Run ``verifier.run_once()`` every ``interval`` seconds (on the group leader only by default).

    A failed run is logged and retried at the next tick; it never stops the worker.
    """
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval!r}")

    async def verify_deliveries() -> None:
        try:
            await verifier.run_once()
        except Exception:  # noqa: BLE001 - the next tick tries again
            log.exception("delivery verification of %s failed", verifier.ledger.config.table)

    app.timer(interval, on_leader=on_leader, name=f"converge.delivery_verify.{verifier.ledger.config.table}")(
        verify_deliveries
    )
