"""Aggregates: totals across entities that are pure functions of the entities' current state.

An app declares an aggregate like a projection: the source ``tables`` it reads (sharing one
partition key, the entity) and ``contribute``, which turns the live rows of one entity into
its contributions: ``Contribution(group, measures, at)`` pairs, the group a dict of group-key
values (``group_by`` names them), the measures a dict of numbers (``measures`` names each
one's kind: ``count``, ``sum``, ``min`` or ``max``), and ``at`` the entity's event time when
the aggregate has a ``window``. A window is tumbling (``Window(size_s)``) or hopping
(``Window(size_s, step_s)``) over that event time, never over the processing clock.

The rule that makes the totals exact under replays, duplicates, edits, deletes and any
arrival order: an entity's contributions are recomputed from its current rows whenever it
changes and written at the entity's version mark (the projection's mark: it never goes
down), replacing the ones it had (``framework.aggregates``); a group's total is recomputed
from the group's current contributions, never adjusted by a delta. So a total is always
the reduction of the contributions of the entities as they are now.

``Aggregate`` is a ``Projection`` whose document is the entity's contributions: the version
marks, the change feed, the projector and every job that re-projects an entity (erasure,
retention, ID mutation, repair) maintain aggregates the way they maintain documents.

Group values that are personal data: ``personal`` maps a group-key name to the kind of data
subject its values are (``{"owner_id": "owner"}``: the kind of an ``App(personal_data=...)``
declaration, whose normalisation compares them). A group holding an erased subject in one of
those parts goes whole, in every window (``framework.erasure.groups``): its contributions,
members, bucket sub-totals and totals are deleted for good and no new contribution is written.
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from framework.core.mutations import CellValue
from framework.core.projection import PartitionKey, Projection
from framework.core.rows import Row
from framework.core.schema import SchemaError

__all__ = [
    "Aggregate", "Contribution", "Window", "MeasureKind", "Group", "group_id", "series_id", "parse_group_id",
    "parse_series", "reduce",
]  # fmt: skip

MeasureKind = Literal["count", "sum", "min", "max"]
_KINDS = ("count", "sum", "min", "max")
#: The form of a data subject kind (as ``framework.erasure.declare.PersonalData.kind``).
_SUBJECT_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True)
class Window:
    """An event-time window: ``size_s`` seconds long, starting every ``step_s`` (tumbling when
    ``step_s`` is None or equals ``size_s``; hopping when smaller). Windows start at multiples of
    the step from the epoch."""

    size_s: int
    step_s: int | None = None

    def __post_init__(self) -> None:
        step = self.step
        if self.size_s <= 0 or step <= 0 or step > self.size_s or self.size_s % step:
            raise SchemaError(
                "window", f"size {self.size_s}s must be a positive multiple of the step {step}s"
            )

    @property
    def step(self) -> int:
        """Seconds between two window starts."""
        return self.step_s or self.size_s

    def starts(self, at: float) -> list[int]:
        """The starts (epoch seconds) of every window holding the event time ``at``, oldest first."""
        last = math.floor(at / self.step) * self.step
        return [s for s in range(last - self.size_s + self.step, last + 1, self.step)]


@dataclass(frozen=True)
class Contribution:
    """One entity's part of one group: the group's key values, its measures and, for a windowed
    aggregate, the event time that places it in windows (epoch seconds)."""

    group: Mapping[str, CellValue]
    measures: Mapping[str, float] = field(default_factory=dict)
    at: float | None = None


@dataclass(frozen=True)
class Group:
    """A group of an aggregate: its series (the group-key values) and window start (0 unwindowed)."""

    series: tuple[CellValue, ...]
    window: int = 0

    @property
    def id(self) -> str:
        """The group's id: ``group_id``."""
        return group_id(self.series, self.window)


#: ``json.dumps(value, separators=(",", ":"), ensure_ascii=True)``, its encoder built once.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def group_id(series: Sequence[CellValue], window: int = 0) -> str:
    """A group's id: its window start and series values as compact JSON (stable, unambiguous)."""
    return _compact([window, *series])


def series_id(series: Sequence[CellValue]) -> str:
    """A series' id (the group key without the window): its values as compact JSON."""
    return _compact(list(series))


def parse_series(text: str) -> list[CellValue]:
    """The values of ``series_id``'s output; ValueError for anything else."""
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError(f"not a series id: {text!r}")
    return value


def parse_group_id(text: str) -> Group:
    """The group of ``group_id``'s output; ValueError for anything else."""
    value = json.loads(text)
    if not isinstance(value, list) or not value or not isinstance(value[0], int):
        raise ValueError(f"not a group id: {text!r}")
    return Group(tuple(value[1:]), value[0])


def reduce(kinds: Mapping[str, MeasureKind], parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The totals of ``parts`` (each a contribution's measures) per measure kind; a measure no part
    has is left out (an empty group has no min or max; its count and sum are 0)."""
    out: dict[str, float] = {name: 0 for name, kind in kinds.items() if kind in ("count", "sum")}
    for part in parts:
        for name, kind in kinds.items():
            value = part.get(name)
            if value is None:
                continue
            if kind in ("count", "sum"):
                out[name] += value
            elif name not in out:
                out[name] = value
            elif kind == "min":
                out[name] = min(out[name], value)
            else:
                out[name] = max(out[name], value)
    return out


class Aggregate(Projection):
    """An aggregate an app declares; subclass and implement ``contribute``.

    ``name`` (an identifier) names its tables and topics; ``tables`` are the source tables (one
    partition key: the entity); ``group_by`` the group-key names every contribution gives;
    ``measures`` each measure's kind; ``window`` an optional event-time window; ``final_after_s``
    how long after a window's end readers may call it final (late edits still change it);
    ``buckets`` how many sub-totals a group's total is reduced from (more than 1 for groups of
    many entities: a change then reads one bucket and the sub-totals, not the whole group; fixed
    for the aggregate's life, as its tables are laid out by it); ``personal`` the group-key names
    whose values are personal data, each with its subject kind (see the module docstring).
    """

    group_by: ClassVar[tuple[str, ...]]
    measures: ClassVar[Mapping[str, MeasureKind]]
    window: ClassVar[Window | None] = None
    final_after_s: ClassVar[float | None] = None
    buckets: ClassVar[int] = 1
    personal: ClassVar[Mapping[str, str]] = {}
    mappings: ClassVar[Mapping[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        n = cls.buckets
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SchemaError("buckets", f"aggregate {cls.__name__}: an int of at least 1, not {n!r}")
        if "name" in cls.__dict__ and "alias" not in cls.__dict__:
            cls.alias = cls.name  # where the projector writes its contributions
        personal = cls.personal
        if not isinstance(personal, Mapping):
            raise SchemaError("personal", f"aggregate {cls.__name__}: a mapping of group-key name to kind")
        group_by = getattr(cls, "group_by", None)
        for part, kind in personal.items():
            if group_by is not None and part not in group_by:
                raise SchemaError(
                    "personal", f"aggregate {cls.__name__}: {part!r} is not in group_by {group_by}"
                )
            if not isinstance(kind, str) or not _SUBJECT_KIND.fullmatch(kind):
                raise SchemaError("personal", f"aggregate {cls.__name__}: {kind!r} is not a subject kind")

    @abc.abstractmethod
    def contribute(self, key: PartitionKey, rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        """The contributions of one entity from the live rows of each source table (by table name;
        a table without rows maps to an empty list). Pure: no I/O, no clock."""

    def build(self, key: PartitionKey, rows: Mapping[str, Sequence[Row]]) -> Mapping[str, Any] | None:
        """The entity's contributions as a document: ``{group id: measures}`` (None: none)."""
        out: dict[str, dict[str, float]] = {}
        for c in self.contribute(key, rows):
            for g in self.groups_of(c):
                if g.id in out:
                    raise SchemaError(
                        "contribute", f"aggregate {self.name}: two contributions to group {g.id}"
                    )
                out[g.id] = self.checked(c.measures)
        return out or None

    def groups_of(self, c: Contribution) -> list[Group]:
        """The groups ``c`` counts in: one per window holding its time (one group unwindowed)."""
        missing = [n for n in self.group_by if n not in c.group]
        if missing or len(c.group) != len(self.group_by):
            raise SchemaError(
                "contribute", f"aggregate {self.name}: group {dict(c.group)} is not {self.group_by}"
            )
        series = tuple(c.group[n] for n in self.group_by)
        if self.window is None:
            return [Group(series)]
        if c.at is None:
            raise SchemaError(
                "contribute", f"aggregate {self.name}: a windowed contribution needs its time (at)"
            )
        return [Group(series, start) for start in self.window.starts(c.at)]

    def personal_values(self, series: Sequence[CellValue]) -> list[tuple[str, str]]:
        """The ``(kind, value)`` of each personal part of a group's ``series`` holding a string."""
        if not self.personal:
            return []
        values = dict(zip(self.group_by, series, strict=False))
        return [(kind, v) for part, kind in self.personal.items() if isinstance(v := values.get(part), str)]

    def bucket_of(self, entity: str) -> int:
        """The bucket of the group sub-totals that ``entity`` counts in (0 with one bucket): a
        stable hash of its id, the same in every process."""
        if self.buckets == 1:
            return 0
        digest = hashlib.blake2b(entity.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.buckets

    def is_final(self, window: int, now: float) -> bool:
        """Whether the window starting at ``window`` (epoch s) is final at ``now``: the aggregate is
        windowed, declares ``final_after_s``, and the window's end plus it is at or before ``now``."""
        if self.window is None or self.final_after_s is None:
            return False
        return window + self.window.size_s + self.final_after_s <= now

    def checked(self, measures: Mapping[str, float]) -> dict[str, float]:
        """``measures`` with every name declared and every value a finite number."""
        out = {}
        for name, value in measures.items():
            if name not in self.measures:
                raise SchemaError("contribute", f"aggregate {self.name}: undeclared measure {name!r}")
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SchemaError("contribute", f"aggregate {self.name}: measure {name} = {value!r}")
            out[name] = value
        for name, kind in self.measures.items():
            if kind not in _KINDS:
                raise SchemaError(
                    "measures", f"aggregate {self.name}: {name} has kind {kind!r}, not one of {_KINDS}"
                )
            if kind == "count" and name not in out:
                out[name] = 1
        return out
