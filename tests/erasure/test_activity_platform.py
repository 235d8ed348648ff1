"""Erasure on the activity platform (row deletes: hub rows and engagement log rows), with notifications
and a delivery ledger on, through the test kit's Driver."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from agents import ActivityProjection, reference_agents
from examples.activity_platform.generator import generate_history
from examples.activity_platform.personal import PERSONAL_DATA
from framework import App
from framework.core.events import Event
from framework.delivery import LedgerConfig
from framework.delivery.ledger import DeliveryLedger
from framework.erasure.declare import Subject
from framework.erasure.run import ERASURE_BATCH, erase
from framework.erasure.verify import verify
from framework.notifications.entries import key_ident
from framework.testing import Driver
from tests.erasure.support import park

APP = App(
    "activity-platform",
    agents=reference_agents(),
    projections=[ActivityProjection()],
    notifications=True,
    delivery=LedgerConfig(("search",)),
    personal_data=PERSONAL_DATA,
)
HISTORY = generate_history(5, 700)


def _addresses(e: Event) -> set[str]:
    p = e.payload
    found = {str(a).lower() for name in ("participants", "shared_with") for a in p.get(name) or ()}
    if "actor" in p:
        found.add(str(p["actor"]).lower())
    return found


def _busiest() -> str:
    counts = Counter(a for e in HISTORY.events for a in _addresses(e))
    return counts.most_common(1)[0][0]


def _holds(row_values: dict, address: str) -> bool:
    cells = [str(row_values.get(c) or "") for c in ("participants", "shared_with", "actor")]
    return any(address in c.split(",") for c in cells)


def test_erase_deletes_activities_and_log_rows_for_good(tmp_path: Path, erasure_key: bytes) -> None:
    address = _busiest()
    mine = [e for e in HISTORY.events if address in _addresses(e)]
    dlq = tmp_path / "dlq"
    park(dlq, mine[:1])
    with Driver(APP) as d:
        d.send(HISTORY.events)
        hub = {r.key["hub_id"]: r.values() for r in d.rows("activity_hub")}
        log = {tuple(r.key.values()): r.values() for r in d.rows("engagement_log")}
        gone_hub = {k for k, v in hub.items() if _holds(v, address)}
        gone_log = {k for k, v in log.items() if _holds(v, address)}
        assert gone_hub and gone_log
        ledger = DeliveryLedger(d.store, APP.delivery)
        d.run(ledger.ensure())
        logged_ids = {k[2] for k in gone_log}
        for e in HISTORY.events[:300]:
            d.run(ledger.register(e.event_id, "crm", captured_at=1_700_000_000_000_000))
        traced = {e.event_id for e in HISTORY.events[:300]}
        listed_before = [n for n in d.notifications() if n.keys and any(
            key_ident({"hub_id": h}) in {key_ident(k) for k in n.keys} for h in gone_hub)]  # fmt: skip
        assert listed_before

        subject = Subject("email", address)
        report = d.run(erase(APP, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq))
        assert report.rows == {"activity_hub": len(gone_hub), "engagement_log": len(gone_log)}
        assert report.parked == 1 and report.notifications >= len(listed_before)
        assert report.ledger == len(traced & logged_ids)
        assert d.run(verify(APP, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq)) == []

        hub_after = {r.key["hub_id"]: r.values() for r in d.rows("activity_hub")}
        log_after = {tuple(r.key.values()): r.values() for r in d.rows("engagement_log")}
        assert hub_after == {k: v for k, v in hub.items() if k not in gone_hub}
        assert log_after == {k: v for k, v in log.items() if k not in gone_log}
        docs = d.documents("activities")
        assert not gone_hub & set(docs)
        for n in d.notifications():
            if n.batch_id.startswith(ERASURE_BATCH):  # the erasure's own entry tells consumers
                assert n.deleted == len(n.keys or ())
                continue
            assert not {key_ident(k) for k in n.keys or ()} & {key_ident({"hub_id": h}) for h in gone_hub}
        left = {str(r.key["message_id"]) for r in d.rows(APP.delivery.table)}
        assert left == traced - logged_ids

        d.send(HISTORY.events)  # a full replay
        assert (
            d.screen is not None and d.screen.current is not None and d.screen.current.suppressed >= len(mine)
        )
        assert d.run(verify(APP, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq)) == []
        assert {r.key["hub_id"]: r.values() for r in d.rows("activity_hub")} == hub_after
        assert {tuple(r.key.values()): r.values() for r in d.rows("engagement_log")} == log_after
        assert set(d.documents("activities")) == set(docs)
        assert address not in json.dumps([r.values() for r in d.rows("converge_erasure_audit")])
