"""The verifier of a whole app: its views with their targets, its notification reader and
checkpoint, and parking into a dead-letter log; and its full sweep (``converge verify`` and the
worker's task).

Given the store's URL (``converge verify``), ``app_verifier`` first refuses a store that is not
the one the index was built from (``stores.identity``: ``StoreMismatch``): its repairs would
rewrite and delete the index from another store's rows. A worker's verifier needs no such check:
the worker paired its index with its store when it opened them."""

from __future__ import annotations

from typing import Any

from framework.coordination import CheckpointStore
from framework.core.repair_guard import DeleteBound
from framework.dlq import DeadLetterWAL
from framework.notifications.reader import NotificationReader
from framework.settings import Settings
from framework.verify.digests import Ledger
from framework.verify.park import dlq_parker
from framework.verify.sweep import Sweep
from framework.verify.verifier import CONSUMER, ChangeVerifier
from stores.base import SearchIndex, WideColumnStore
from stores.identity import require_pairing

__all__ = ["app_verifier", "app_sweep"]


async def app_verifier(
    app: Any,
    store: WideColumnStore,
    index: SearchIndex | None,
    contributions: SearchIndex | None,
    checkpoints: CheckpointStore,
    dlq: DeadLetterWAL,
    *,
    settle: float,
    recheck: float,
    store_url: str = "",
    sample: float | None = None,
) -> ChangeVerifier:
    """The verifier of every view of ``app`` (a ``framework.App`` whose notifications are on):
    projections against ``index``, aggregates against ``contributions``. With ``store_url`` (the
    store's), ``StoreMismatch`` when ``store`` is not the source of a projection's index.
    ``sample``: the fraction of agreeing changed documents rebuilt all the same (default: the
    setting ``verify_sample``, from the environment). Where the projectors record (the setting
    ``verify_record``), a page waits up to ``settle`` seconds more for documents not written
    yet (``ChangeVerifier``'s ``wait``)."""
    notifications = app.notifications
    if notifications is None:
        raise ValueError(f"verify: app {app.name} records no notifications (App(notifications=True))")
    if index is not None and store_url:
        for p in app.projections:
            await require_pairing(store, index, p.alias, store_url)
    retention = notifications.retention
    reader = NotificationReader(store, checkpoints, CONSUMER, retention=retention, settle=settle)
    await reader.ensure()
    targets: dict[str, Any] = {p.name: index for p in app.projections}
    targets.update({a.name: contributions for a in app.aggregates})
    park = dlq_parker({v.name: (v, app.change_topic(v)) for v in app.views}, dlq)
    settings = Settings.resolve(app.name)
    if sample is None:
        sample = settings.verify_sample
    # where projectors record, a document not written yet waits for them up to the settle time
    wait = settle if settings.verify_record else 0.0
    verifier = ChangeVerifier(app.views, store, targets, reader, recheck=recheck, park=park,
                              tenant_of=notifications.tenant_of, app=app.name, sample=sample,
                              wait=wait)  # fmt: skip
    await verifier.ensure()
    return verifier


async def app_sweep(
    verifier: ChangeVerifier,
    app: Any,
    checkpoints: CheckpointStore,
    every: float | None,
    max_deletes: DeleteBound | None = None,
) -> Sweep:
    """The full sweep of every view ``verifier`` verifies, every ``every`` seconds (None: when
    run), its ledger in the verifier's store (tables created), its last report in ``checkpoints``;
    ``max_deletes``: the bound on one sweep's deletions (default: ``Sweep``'s)."""
    sweep = Sweep(verifier, Ledger(verifier.store, app.name), settle=verifier.reader.settle,
                  checkpoints=checkpoints, every=every, max_deletes=max_deletes)  # fmt: skip
    await sweep.ensure()
    return sweep
