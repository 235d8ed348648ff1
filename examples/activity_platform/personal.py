"""The activity platform's personal data: people, found by e-mail address.

``converge erase --app examples.activity_platform.app:app --subject email:ADDRESS``
deletes every activity the address took part in (a hub row whose
``participants`` or ``shared_with`` list holds it: the subject line and the
preview of a message to or from a person are that person's data, so the whole
row goes) and every engagement log row the address acted in (``actor``).
Addresses compare lower-cased, as the payload validation stores them. Rows are
found by a scan of each table (no table is keyed by address).

CRM owners (the leads and contacts activities are logged against) are people
too: ``--subject owner:ID`` deletes the owner's ``owner_activity`` rows (its
partition key holds the id: a ``key_column`` declaration, found by a scan)
and, as ``owner_daily`` groups by ``owner_id`` (``Aggregate.personal``), every
group of the owner in that aggregate (``framework.erasure.groups``).
"""

from __future__ import annotations

from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG, OWNER_ACTIVITY
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
    PersonalData("owner", OWNER_ACTIVITY.name, key_column="owner_id"),
)
