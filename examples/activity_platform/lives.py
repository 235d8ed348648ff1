"""The planned lives of activities: every source change of an email or a meeting.

A ``LifePlanner`` turns one activity into events in source order, each
paired with the domain change it stands for (``truth.Effect``). Versions are
the source's modification times in microseconds, strictly increasing per
source record (the activity's record, its insight stream); engagement events
are records of their own. Created events name the activity's CRM owner
(``owner_id``, ``owner_of``), the owner id of ``owner_activity``.
"""

from __future__ import annotations

import random
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from agents.identity import ActivityRef
from examples.activity_platform import content
from examples.activity_platform.content import Org
from examples.activity_platform.truth import Effect, EngagementFact, InsightWrite, RecordCancel, RecordWrite
from framework.core.events import Event

__all__ = ["Planned", "LifePlanner", "owner_of", "OWNERS", "SEC", "MIN", "HOUR", "DAY"]

SEC = 1_000_000
MIN = 60 * SEC
HOUR = 60 * MIN
DAY = 24 * HOUR


#: CRM owners (leads and contacts) per organisation.
OWNERS = 25


def owner_of(ref: ActivityRef) -> str:
    """The CRM owner an activity is logged against: a hash of the activity (no random draw, so
    the rest of a seeded history stays as it was)."""
    n = zlib.crc32(ref.hub_id.encode()) % OWNERS
    return f"{'lead' if n % 3 else 'contact'}-{n:02d}"


@dataclass(frozen=True, slots=True)
class Planned:
    """One source change: the event that announces it and its effect on the ground truth."""

    event: Event
    ref: ActivityRef
    kind: str
    effect: Effect


class LifePlanner:
    """Plans activities with one random generator; ``items`` collects every planned change."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[Planned] = []
        self._seq = 0

    def _gap(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def _emit(
        self,
        ref: ActivityRef,
        kind: str,
        type_: str,
        version: int,
        effect: Effect,
        *,
        occurred_at: int | None = None,
        **fields: Any,
    ) -> None:
        """Plan one event; a change occurs up to 2 ms before the source stamps its version."""
        if occurred_at is None:
            occurred_at = version - self._gap(0, 2_000)
        payload = {"org_id": ref.org_id, "source": ref.source, "external_id": ref.external_id, **fields}
        event_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        event = Event(event_id, ref.ordering_key, version, max(0, occurred_at), type_, payload)
        self.items.append(Planned(event, ref, kind, effect))

    def _participants(self, org: Org, n_contacts: int) -> list[str]:
        people = [self.rng.choice(org.users), *self.rng.sample(org.contacts, n_contacts)]
        if self.rng.random() < 0.1:  # sources send messy lists: case variants and repeats
            people.append(people[-1].upper())
        return people

    def _content(self, org: Org) -> dict[str, Any]:
        return {
            "subject": content.subject(self.rng, org),
            "body_preview": content.body_preview(self.rng, org),
            "participants": self._participants(org, self.rng.randint(1, 3)),
        }

    def _change(self, org: Org) -> dict[str, Any]:
        full = self._content(org)
        names = self.rng.sample(sorted(full), self.rng.randint(1, 2))
        return {n: full[n] for n in sorted(names)}

    def email(self, org: Org, t0: int) -> None:
        """An email: sent, sometimes edited, engaged with, with insights and sharing."""
        ref = ActivityRef(
            org.org_id, self.rng.choice(("gmail", "exchange")), f"msg-{self.rng.getrandbits(48):012x}"
        )
        body = self._content(org)
        record = _record(body, starts_at=t0, status="sent")
        self._emit(ref, "email", "email.created", t0, record, **body, sent_at=t0, owner_id=owner_of(ref))
        t = t0
        if self.rng.random() < 0.15:
            t += self._gap(MIN, 2 * HOUR)
            change = self._change(org)
            self._emit(ref, "email", "email.updated", t, _record(change), **change)
        self._engagement(ref, t0, body["participants"])
        self._insights(org, ref, "email", t0, [])

    def meeting(self, org: Org, t0: int) -> None:
        """A meeting: created, updated, rescheduled, maybe cancelled and re-created."""
        ref = ActivityRef(
            org.org_id, self.rng.choice(("gcal", "outlook")), f"evt-{self.rng.getrandbits(48):012x}"
        )
        t = self._create_meeting(org, ref, t0)
        cancels: list[int] = []
        for _ in range(2):
            if self.rng.random() >= 0.22:
                break
            t += self._gap(10 * MIN, 3 * DAY)
            cancels.append(t)
            self._emit(ref, "meeting", "meeting.cancelled", t, RecordCancel())
            if self.rng.random() >= 0.45:
                break
            t = self._create_meeting(org, ref, t + self._gap(HOUR, 5 * DAY))
        self._insights(org, ref, "meeting", t0, cancels)

    def _create_meeting(self, org: Org, ref: ActivityRef, t0: int) -> int:
        body = self._content(org)
        when = self._slot(t0)
        record = _record(body, **when, status="scheduled")
        self._emit(ref, "meeting", "meeting.created", t0, record, **body, **when, owner_id=owner_of(ref))
        t = t0
        for _ in range(self.rng.choice((0, 0, 1, 1, 2, 3))):
            t += self._gap(5 * MIN, 3 * DAY)
            if self.rng.random() < 0.4:
                when = self._slot(t)
                self._emit(
                    ref,
                    "meeting",
                    "meeting.rescheduled",
                    t,
                    _record({}, **when, status="rescheduled"),
                    **when,
                )
            else:
                change = self._change(org)
                self._emit(ref, "meeting", "meeting.updated", t, _record(change), **change)
        return t

    def _slot(self, now: int) -> dict[str, int]:
        start = now + self._gap(HOUR, 21 * DAY)
        start -= start % (15 * MIN)
        return {"starts_at": start, "ends_at": start + self.rng.choice((15, 30, 45, 60, 90)) * MIN}

    def _engagement(self, ref: ActivityRef, sent_at: int, participants: list[str]) -> None:
        sender, recipients = participants[0], participants[1:] or participants
        facts = [("sent", sent_at, sender)]
        if self.rng.random() < 0.75:
            at = sent_at + self._gap(30 * SEC, 3 * DAY)
            facts.append(("opened", at, self.rng.choice(recipients)))
            if self.rng.random() < 0.35:  # a click is often logged in the same microsecond as its open
                at = at if self.rng.random() < 0.3 else at + self._gap(SEC, HOUR)
                facts.append(("clicked", at, facts[-1][2]))
            if self.rng.random() < 0.25:
                at += self._gap(MIN, 2 * DAY)
                facts.append(("replied", at, self.rng.choice(recipients)))
            if self.rng.random() < 0.3:
                facts.append(("opened", at + self._gap(HOUR, 5 * DAY), self.rng.choice(recipients)))
        for state, at, actor in facts:
            fact = EngagementFact(state, at, actor, self._seq)
            self._seq += 1
            version = at + self._gap(0, 3 * SEC)
            self._emit(ref, "email", f"engagement.{state}", version, fact, actor=actor, occurred_at=at)

    def _insights(self, org: Org, ref: ActivityRef, kind: str, t0: int, cancels: list[int]) -> None:
        """Model insights and sharing of one activity, in one stream of increasing versions."""
        planned: dict[int, tuple[str, dict[str, Any]]] = {}
        if self.rng.random() < 0.7:
            ti = t0 + self._gap(-200_000, MIN)
            planned[ti] = ("insight.computed", self._insight(all_fields=True))
            if self.rng.random() < 0.35:
                planned[ti + self._gap(HOUR, 2 * DAY)] = ("insight.computed", self._insight(all_fields=False))
        for vc in cancels:
            if self.rng.random() < 0.3:  # computed after the cancellation: survives it
                planned[vc + self._gap(SEC, HOUR)] = ("insight.computed", self._insight(all_fields=False))
            if self.rng.random() < 0.1:  # clock collision with the cancellation: the tombstone wins
                planned[vc] = ("insight.computed", self._insight(all_fields=False))
        if self.rng.random() < 0.3:
            ts = t0 + self._gap(MIN, DAY)
            planned[ts] = (
                "sharing.changed",
                {"shared_with": self.rng.sample(org.users, self.rng.randint(1, 3))},
            )
            if self.rng.random() < 0.3:
                planned[ts + self._gap(HOUR, 3 * DAY)] = ("sharing.changed", {"shared_with": []})
        for version in sorted(planned):
            type_, fields = planned[version]
            effect = InsightWrite({k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
            self._emit(ref, kind, type_, version, effect, **fields)

    def _insight(self, *, all_fields: bool) -> dict[str, Any]:
        rng = self.rng
        fields: dict[str, Any] = {
            "sentiment": rng.choice(("negative", "neutral", "positive", "mixed")),
            "topic": rng.choice(content.TOPICS),
            "next_step": rng.choice(content.NEXT_STEPS) if rng.random() < 0.8 else None,
            "score": round(rng.random(), 4),
        }
        if all_fields:
            return fields
        return {n: fields[n] for n in sorted(rng.sample(sorted(fields), rng.randint(1, 3)))}


def _record(fields: dict[str, Any], **extra: Any) -> RecordWrite:
    """The record change of an event: its fields under their column names (sent_at is starts_at)."""
    out = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return RecordWrite({**out, **extra})
