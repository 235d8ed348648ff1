"""How long parked (dead-letter) events are kept, per partition: the ``dlq_retention`` rules.

A policy is written as comma-separated ``PATTERN=DURATION`` rules, e.g.
``orders=30d, orders/*/*/TimeoutError=7d, */*/mapper=forever``:

- ``PATTERN`` is ``pipeline[/event_type[/stage[/error_class]]]``; each part is a partition
  label, compared exactly, or ``*`` (any label); parts left out are ``*``. A label holding
  ``/``, ``,`` or ``=`` cannot be named (only ``*`` matches it).
- ``DURATION`` is a duration as ``framework.core.durations.parse_duration`` reads it (``12h``,
  ``30d``, ``1w``, seconds), longer than 0, or the word ``forever``.
- The most specific matching rule wins: comparing two matching rules part by part from the
  pipeline to the error class, the first part that one names and the other leaves ``*`` decides
  for the one naming it (so ``orders`` beats ``*/*/*/TimeoutError``, and ``orders/*/*/TimeoutError``
  beats ``orders``). Two rules with the same pattern are an error, so there is never a tie.
- A partition no rule matches is kept forever; so is every partition under an empty policy
  (the value ``forever`` alone, or nothing), the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framework.core.durations import DURATION_HELP, parse_duration

__all__ = ["DeadLetterRetention", "RetentionRule", "FOREVER", "ANY"]

FOREVER = "forever"
ANY = "*"
_PARTS = 4


@dataclass(frozen=True)
class RetentionRule:
    """One ``PATTERN=DURATION`` rule: four labels or ``*``, and seconds to keep (None: forever)."""

    pattern: tuple[str, str, str, str]
    seconds: float | None
    duration: str

    @classmethod
    def parse(cls, text: str) -> RetentionRule:
        """The rule written as ``text``; ValueError naming what is wrong."""
        what = f"rule {text.strip()!r}"
        pattern, eq, duration = (p.strip() for p in text.partition("="))
        if not eq or not pattern or not duration:
            raise ValueError(f"{what}: expected PATTERN=DURATION, e.g. orders=30d")
        parts = pattern.split("/")
        if len(parts) > _PARTS or not all(parts):
            raise ValueError(
                f"{what}: PATTERN is pipeline[/event_type[/stage[/error_class]]], each a label or *"
            )
        full = (*parts, *[ANY] * (_PARTS - len(parts)))
        if duration == FOREVER:
            return cls((full[0], full[1], full[2], full[3]), None, FOREVER)
        try:
            seconds = parse_duration(duration)
        except ValueError:
            raise ValueError(
                f"{what}: {duration!r} is not a duration ({DURATION_HELP}) or {FOREVER}"
            ) from None
        if seconds <= 0:
            raise ValueError(f"{what}: a retention must be longer than 0 ({FOREVER} keeps all)")
        return cls((full[0], full[1], full[2], full[3]), seconds, duration)

    def matches(self, partition: Sequence[str]) -> bool:
        """Whether every part of the pattern is ``*`` or the partition's label."""
        return all(p in (ANY, label) for p, label in zip(self.pattern, partition, strict=True))

    def specificity(self) -> tuple[bool, ...]:
        """Which parts the pattern names; the greater tuple is the more specific rule."""
        return tuple(p != ANY for p in self.pattern)

    def describe(self) -> str:
        """The rule as ``p/e/s/c=DURATION``."""
        return f"{'/'.join(self.pattern)}={self.duration}"


@dataclass(frozen=True)
class DeadLetterRetention:
    """The retention rules of every partition; see the module docstring for the syntax and the match."""

    rules: tuple[RetentionRule, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> DeadLetterRetention:
        """The policy written as ``text`` (None, empty or ``forever``: keep everything); ValueError."""
        raw = (text or "").strip()
        if raw in ("", FOREVER):
            return cls()
        rules: list[RetentionRule] = []
        for item in raw.split(","):
            if not item.strip():
                raise ValueError(f"empty rule in {raw!r} (a comma too many?)")
            rule = RetentionRule.parse(item)
            if any(r.pattern == rule.pattern for r in rules):
                raise ValueError(f"pattern {'/'.join(rule.pattern)} is given twice")
            rules.append(rule)
        return cls(tuple(rules))

    def match(self, partition: Sequence[str]) -> RetentionRule | None:
        """The most specific rule matching ``partition`` (pipeline, event type, stage, error class)."""
        found = [r for r in self.rules if r.matches(partition)]
        return max(found, key=RetentionRule.specificity, default=None)

    def retention(self, partition: Sequence[str]) -> float | None:
        """Seconds to keep ``partition``'s parked events; None: forever."""
        rule = self.match(partition)
        return None if rule is None else rule.seconds

    def describe(self) -> str:
        """The rules, one phrase: what each keeps, then the default."""
        if not self.rules:
            return "every partition kept forever"
        return ", ".join(r.describe() for r in self.rules) + "; any other partition kept forever"
