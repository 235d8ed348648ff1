"""The support desk's personal data: the requester, found by e-mail address.

``converge erase --app examples.support_desk.app:app --subject email:ADDRESS``
finds every ticket whose ``requester_email`` is the address (a scan of
``ticket``; addresses compare lower-cased, as the helpdesk payload stores
them) and tombstones the requester's cells (``PII_COLUMNS``) at the maximum
version: the ticket, its status log and its comments stay; the requester's
name and address are gone for good, and the erasure's deny-list keeps a
replayed ``ticket.created`` from writing them again.
"""

from __future__ import annotations

from examples.support_desk.schemas import PII_COLUMNS, TICKET
from framework import PersonalData

__all__ = ["PERSONAL_DATA"]

PERSONAL_DATA: tuple[PersonalData, ...] = (
    PersonalData("email", TICKET.name, columns=("requester_email",), erase=PII_COLUMNS, normalize=str.lower),
)
