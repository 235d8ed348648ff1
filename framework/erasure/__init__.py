"""Erasure on request: remove a data subject everywhere converge keeps data, for good.

An app declares its personal data (``App(personal_data=[PersonalData(...)])``);
``erase`` removes a subject (``KIND:VALUE``) from the store, the index, the
dead-letter WAL and its exports, the delivery ledger and the notification
entries and ID mutation's records, records an audit entry keyed by an HMAC of
the subject, and puts it on the app's deny-list, which ``map_event``, the join
book's mappings and ID mutation's re-routing consult through ``SubjectScreen``
so a replay, a backfill or a late request cannot bring it back; ``verify``
proves there is no residue. See docs/how-to/erasure.md and ``converge erase``.
"""

from framework.erasure.declare import PersonalData, Subject, mentions, parse_subject
from framework.erasure.keyed import ENV_KEY, ErasureKeyError, erasure_key, subject_hash
from framework.erasure.run import ErasureReport, erase
from framework.erasure.screen import ScreenHolder, SubjectScreen, load_screen, screen_verdict
from framework.erasure.tables import AUDIT_TABLE, DENYLIST_TABLE, ERASURE_TABLES
from framework.erasure.verify import Residue, verify

__all__ = [
    "PersonalData",
    "Subject",
    "parse_subject",
    "mentions",
    "ENV_KEY",
    "ErasureKeyError",
    "erasure_key",
    "subject_hash",
    "ErasureReport",
    "erase",
    "Residue",
    "verify",
    "SubjectScreen",
    "ScreenHolder",
    "load_screen",
    "screen_verdict",
    "AUDIT_TABLE",
    "DENYLIST_TABLE",
    "ERASURE_TABLES",
]
