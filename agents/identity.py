"""Identity of a hub row: its natural key and the ordering key of its events."""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.keys import natural_key

__all__ = ["HUB_NAMESPACE", "ActivityRef", "hub_id", "ordering_key"]

#: Namespace of the activity hub's natural keys.
HUB_NAMESPACE = "activity"


def hub_id(org_id: str, source: str, external_id: str) -> str:
    """The hub row key of an activity: uuid5 over tenant, source system and external id.

    The tenant is part of the key because external ids are only unique inside
    one tenant's mailbox or calendar.
    """
    return natural_key(HUB_NAMESPACE, org_id, source, external_id)


def ordering_key(org_id: str, hub: str) -> str:
    """The Kafka key of every event about the hub row ``hub``, whatever its topic."""
    return f"{org_id}:{hub}"


@dataclass(frozen=True, slots=True)
class ActivityRef:
    """The source identity every event about an activity carries."""

    org_id: str
    source: str
    external_id: str

    @property
    def hub_id(self) -> str:
        return hub_id(self.org_id, self.source, self.external_id)

    @property
    def ordering_key(self) -> str:
        return ordering_key(self.org_id, self.hub_id)
