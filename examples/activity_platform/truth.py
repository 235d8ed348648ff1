"""Ground truth of a generated history, in the source systems' own terms.

The generator records, for every event it emits, the *domain* change it
stands for (a record write, a cancellation, an insight, an engagement). Folded
in source order they give what each source system holds at the end of the
history; the oracle derives the expected store state from that, without the
agents' mappings or a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "RecordWrite",
    "RecordCancel",
    "InsightWrite",
    "EngagementFact",
    "Effect",
    "ActivityTruth",
    "Truth",
]


@dataclass(frozen=True, slots=True)
class RecordWrite:
    """The source record set ``fields`` (subject, body_preview, participants, starts_at, ends_at, status)."""

    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordCancel:
    """The source record was cancelled (the meeting is gone until re-created)."""


@dataclass(frozen=True, slots=True)
class InsightWrite:
    """The insight or sharing service set ``fields``; a None value clears the field."""

    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EngagementFact:
    """A recipient engaged (``state``) at ``at``; ``seq`` is its place in occurrence order."""

    state: str
    at: int
    actor: str
    seq: int


Effect: TypeAlias = RecordWrite | RecordCancel | InsightWrite | EngagementFact


@dataclass(frozen=True, slots=True)
class Engaged:
    """An emitted engagement: the fact and its event's id and version."""

    fact: EngagementFact
    event_id: str
    version: int


@dataclass
class ActivityTruth:
    """What the sources hold about one activity (one hub row)."""

    hub_id: str
    org_id: str
    source: str
    external_id: str
    kind: str
    #: Fields of the current incarnation of the record: name -> (value, version of its last write).
    record: dict[str, tuple[Any, int]] = field(default_factory=dict)
    #: Versions of every record write (created/updated/rescheduled) of any incarnation.
    record_versions: list[int] = field(default_factory=list)
    #: Version of the latest cancellation, if any.
    cancelled_at: int | None = None
    #: Insight and sharing fields: name -> (value or None, version of its last write).
    insights: dict[str, tuple[Any, int]] = field(default_factory=dict)
    insight_versions: list[int] = field(default_factory=list)
    engagement: list[Engaged] = field(default_factory=list)

    def apply(self, effect: Effect, version: int, event_id: str) -> None:
        """Fold one emitted change, in the source's own (version) order."""
        if isinstance(effect, RecordWrite):
            self.record.update({k: (v, version) for k, v in effect.fields.items()})
            self.record_versions.append(version)
        elif isinstance(effect, RecordCancel):
            self.record.clear()
            self.cancelled_at = max(version, self.cancelled_at or 0)
        elif isinstance(effect, InsightWrite):
            self.insights.update({k: (v, version) for k, v in effect.fields.items()})
            self.insight_versions.append(version)
        else:
            self.engagement.append(Engaged(effect, event_id, version))


@dataclass
class Truth:
    """Ground truth of a whole history: every activity, by hub id."""

    activities: dict[str, ActivityTruth] = field(default_factory=dict)
