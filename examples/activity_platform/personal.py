"""The activity platform's personal data: people, found by e-mail address.

``converge erase --app examples.activity_platform.app:app --subject email:ADDRESS``
deletes every activity the address took part in (a hub row whose
``participants`` or ``shared_with`` list holds it: the subject line and the
preview of a message to or from a person are that person's data, so the whole
row goes) and every engagement log row the address acted in (``actor``).
Addresses compare lower-cased, as the payload validation stores them. Rows are
found by a scan of each table (no table is keyed by address).
"""

from __future__ import annotations

from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from framework import PersonalData

__all__ = ["PERSONAL_DATA"]

PERSONAL_DATA: tuple[PersonalData, ...] = (
    PersonalData(
        "email",
        ACTIVITY_HUB.name,
        columns=("participants", "shared_with"),
        separator=",",
        normalize=str.lower,
    ),
    PersonalData("email", ENGAGEMENT_LOG.name, columns=("actor",), normalize=str.lower),
)
