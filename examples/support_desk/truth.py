"""Ground truth of a generated history: what the source systems hold about each ticket.

The generator records, with every event it emits, the change in the source
system's own terms (the helpdesk wrote these fields, the scorer set these,
the privacy service erased the requester, a status changed, a comment was
posted). Folded in source (version) order they are the ground truth the
oracle derives the expected store state and documents from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from framework import natural_key

__all__ = [
    "RecordWrite",
    "Augment",
    "Erasure",
    "StatusChange",
    "CommentPosted",
    "Effect",
    "Logged",
    "TicketTruth",
    "Truth",
]


@dataclass(frozen=True, slots=True)
class RecordWrite:
    """The helpdesk set these record fields (``created_at`` only when the ticket was created)."""

    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Augment:
    """An enrichment service set these fields; ``None`` withdraws a value."""

    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Erasure:
    """The privacy service erased the requester's personal data from the ticket."""


@dataclass(frozen=True, slots=True)
class StatusChange:
    """The ticket's status became ``status`` at ``at``; ``seq`` orders the ticket's changes."""

    status: str
    at: int
    changed_by: str
    seq: int


@dataclass(frozen=True, slots=True)
class CommentPosted:
    """Someone posted a comment at ``at``."""

    comment_id: str
    at: int
    author_kind: str
    body: str


Effect: TypeAlias = RecordWrite | Augment | Erasure | StatusChange | CommentPosted


L = TypeVar("L", StatusChange, CommentPosted)


@dataclass(frozen=True, slots=True)
class Logged(Generic[L]):
    """A status change or comment with the id and version of the event that carried it."""

    effect: L
    event_id: str
    version: int


@dataclass
class TicketTruth:
    """What the sources hold about one ticket."""

    tenant: str
    source: str
    external_id: str
    #: Record fields: name -> (value, version of its last write).
    record: dict[str, tuple[Any, int]] = field(default_factory=dict)
    #: Augmented fields: name -> (value or None, version of its last write).
    augmented: dict[str, tuple[Any, int]] = field(default_factory=dict)
    #: Versions of every write of the ticket row (record and augmented).
    row_writes: list[int] = field(default_factory=list)
    #: Version of the latest erasure, if any.
    erased_at: int | None = None
    statuses: list[Logged[StatusChange]] = field(default_factory=list)
    comments: list[Logged[CommentPosted]] = field(default_factory=list)
    #: Versions of every event about the ticket.
    versions: list[int] = field(default_factory=list)

    @property
    def ticket_id(self) -> str:
        return natural_key("ticket", self.tenant, self.source, self.external_id)

    def apply(self, effect: Effect, version: int, event_id: str) -> None:
        """Fold one change, in source (version) order."""
        self.versions.append(version)
        if isinstance(effect, RecordWrite | Augment):
            target = self.record if isinstance(effect, RecordWrite) else self.augmented
            target.update({k: (v, version) for k, v in effect.fields.items()})
            self.row_writes.append(version)
        elif isinstance(effect, Erasure):
            self.erased_at = max(version, self.erased_at or 0)
        elif isinstance(effect, StatusChange):
            self.statuses.append(Logged(effect, event_id, version))
        else:
            self.comments.append(Logged(effect, event_id, version))


@dataclass
class Truth:
    """Every ticket of a history, by ``(tenant, source, external_id)``."""

    tickets: dict[tuple[str, str, str], TicketTruth] = field(default_factory=dict)

    def ticket(self, tenant: str, source: str, external_id: str) -> TicketTruth:
        key = (tenant, source, external_id)
        if key not in self.tickets:
            self.tickets[key] = TicketTruth(tenant, source, external_id)
        return self.tickets[key]
