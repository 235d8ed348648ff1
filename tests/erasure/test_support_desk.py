"""Erasure on the support desk (cell tombstones: the ticket stays), through the test kit's Driver.

Real parts: the Driver's SQLite store and in-memory index, a real dead-letter
WAL on disk and an export file of it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from examples.support_desk.schemas import PII_COLUMNS
from framework.erasure.declare import Subject
from framework.erasure.keyed import subject_hash
from framework.erasure.run import erase
from framework.erasure.tables import AUDIT_TABLE, DENYLIST_TABLE
from framework.erasure.verify import verify
from framework.testing import Driver
from tests.erasure.support import export, park, parked_values

HISTORY = generate_history(11, 60)


def _requesters() -> Counter[str]:
    return Counter(
        str(e.payload["requester_email"]).lower() for e in HISTORY.events if "requester_email" in e.payload
    )


def _subject_events(address: str) -> list:
    return [e for e in HISTORY.events if str(e.payload.get("requester_email", "")).lower() == address]


def test_erase_verify_replay_keeps_the_subject_out(tmp_path: Path, erasure_key: bytes) -> None:
    address, _ = _requesters().most_common(1)[0]
    other = [a for a in _requesters() if a != address][0]
    dlq, exports = tmp_path / "dlq", tmp_path / "exports"
    exports.mkdir()
    park(dlq, _subject_events(address)[:2] + _subject_events(other)[:1])
    assert export(dlq, exports / "parked.jsonl") == 3
    with Driver(app) as d:
        d.send(deliver(HISTORY.events, 3))
        before = {r.key["ticket_id"]: r.values() for r in d.rows("ticket")}
        held = {t for t, v in before.items() if v.get("requester_email") == address}
        assert held, "the subject must own tickets in this history"
        subject = Subject("email", address.upper())  # compared lower-cased, as declared
        residue = d.run(verify(app, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq,
                               exports=[exports]))  # fmt: skip
        assert {r.place for r in residue} >= {"store", "index", "dlq", "export", "denylist"}

        report = d.run(erase(app, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq,
                             exports=[exports]))  # fmt: skip
        assert report.cells == {"ticket": len(held)} and report.rows == {}
        assert report.parked == 2 and report.complete
        assert sum(report.exports.values()) == 2
        assert report.documents == {"tickets": len(held)}
        assert d.run(verify(app, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq,
                            exports=[exports])) == []  # fmt: skip

        after = {r.key["ticket_id"]: r.values() for r in d.rows("ticket")}
        for ticket, cells in before.items():  # the rest of every ticket is untouched
            gone = PII_COLUMNS if ticket in held else ()
            assert after[ticket] == {c: v for c, v in cells.items() if c not in gone}
        docs = d.documents("tickets")
        assert all("requester_email" not in docs[t][0] and docs[t][0]["ticket_id"] == t for t in held)
        assert [json.loads(v)["payload"].get("requester_email", "").lower() for v in parked_values(dlq)] == [
            other
        ]

        # the original events again, all of them, in another order: nothing comes back
        d.send(deliver(HISTORY.events, 4))
        assert d.screen is not None and d.screen.current is not None and d.screen.current.suppressed > 0
        assert d.run(verify(app, subject, key=erasure_key, store=d.store, index=d.index, dlq_root=dlq,
                            exports=[exports])) == []  # fmt: skip
        assert {r.key["ticket_id"]: r.values() for r in d.rows("ticket")} == after

        audit = d.rows(AUDIT_TABLE.name)
        assert len(audit) == 1
        text = json.dumps([{**r.key, **r.values()} for r in audit])
        assert address not in text.lower()
        hashed = subject_hash(erasure_key, "email", address)
        assert audit[0].values()["subject"] == hashed and audit[0].values()["kind"] == "email"
        assert json.loads(str(audit[0].values()["counts"]))["cells"] == {"ticket": len(held)}
        assert [r.key["subject"] for r in d.rows(DENYLIST_TABLE.name)] == [hashed]


def test_dry_run_changes_nothing(tmp_path: Path, erasure_key: bytes) -> None:
    address, _ = _requesters().most_common(1)[0]
    with Driver(app) as d:
        d.send(HISTORY.events)
        rows = d.rows("ticket")
        docs = d.documents("tickets")
        report = d.run(erase(app, Subject("email", address), key=erasure_key, store=d.store, index=d.index,
                             dry_run=True))  # fmt: skip
        assert report.cells["ticket"] > 0 and report.dry_run
        assert d.rows("ticket") == rows and d.documents("tickets") == docs
        assert d.rows(AUDIT_TABLE.name) == [] and d.rows(DENYLIST_TABLE.name) == []


def test_a_subject_with_no_data_is_put_on_the_deny_list(erasure_key: bytes) -> None:
    with Driver(app) as d:
        d.send(HISTORY.events)
        report = d.run(erase(app, Subject("email", "nobody@example.org"), key=erasure_key, store=d.store,
                             index=d.index))  # fmt: skip
        assert report.cells == {} and report.rows == {} and report.scanned == len(d.rows("ticket"))
        assert len(d.rows(DENYLIST_TABLE.name)) == 1
