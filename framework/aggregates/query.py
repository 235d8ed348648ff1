"""Interactive queries over the store: aggregate totals, window ranges, top groups, one entity.

``Queries`` reads what the stream maintains (``tables.py``): a group's totals (one row of
``<name>_totals``), the windows of a series in a time range (one partition read with a
clustering range), the top groups by a measure (a scan of ``<name>_totals``), and one entity
by its natural key (its merged rows in every source table of the views that read the table,
the current state of its state logs, the views' version marks). Each answer carries the
version it reflects and, for a windowed aggregate, whether each window is final: its end plus
the aggregate's ``final_after_s`` is at or before the injected clock (never when
``final_after_s`` is None), and how many times it was revised while final (``revisions``, what
the totals processor counted). Answers are plain dataclasses with ``to_dict`` for JSON.
``converge query`` (``framework.cli.query``) and the worker's ``/query`` routes (``http.py``)
parse their text input with ``parse_group`` and ``parse_key`` and answer with the same objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.aggregates.tables import decode_measures, tables_of
from framework.core.aggregate import Aggregate, parse_series, reduce, series_id
from framework.core.errors import ConvergeError
from framework.core.mutations import CellValue
from framework.core.projection import Projection
from framework.core.rows import Row, cell_int
from framework.core.schema import SchemaError, TableSchema
from framework.core.state_log import StateEntry, current_state
from stores.base import WideColumnStore

__all__ = [
    "QueryError", "Queries", "Total", "Windows", "Top", "EntityRow", "Entity", "parse_group", "parse_key",
    "parse_precedence", "split_pair",
]  # fmt: skip

_STATE_LOG_KEY = (("at", "bigint"), ("event_id", "text"))


class QueryError(ConvergeError):
    """Bad query input (an unknown aggregate, table or measure, a malformed group, key or window)."""


def _plain(value: Any) -> Any:
    """``value`` with bytes as hex text, for JSON."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Total:
    """A group's totals: ``found`` False (measures of an empty group) when nothing contributes.

    ``window`` and ``window_end`` are epoch seconds (None unwindowed); ``reflects`` is the
    highest version of the contributions the totals were reduced from; ``final`` None unwindowed;
    ``revisions`` how many times the totals processor changed the totals while the window was
    final (0 unless the aggregate declares ``final_after_s``; reader metadata, not converged).
    """

    aggregate: str
    group: dict[str, CellValue]
    window: int | None
    window_end: int | None
    measures: dict[str, float]
    members: int
    reflects: int
    final: bool | None
    revisions: int = 0
    found: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return _plain(dataclasses.asdict(self))


@dataclass(frozen=True)
class Windows:
    """The windows of one series starting in [``since``, ``until``), oldest first."""

    aggregate: str
    group: dict[str, CellValue]
    since: float | None
    until: float | None
    windows: list[Total]

    @property
    def reflects(self) -> int:
        """The highest version any of the windows reflects (0 without windows)."""
        return max((w.reflects for w in self.windows), default=0)

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return {**_plain(dataclasses.asdict(self)), "reflects": self.reflects}


@dataclass(frozen=True)
class Top:
    """The ``limit`` groups with the largest ``by`` (of window ``window`` when given), largest first,
    ties in ``Queries.top``'s order; ``scanned``: the totals rows read (all of them, whatever the window)."""

    aggregate: str
    by: str
    limit: int
    window: int | None
    groups: list[Total]
    scanned: int

    @property
    def reflects(self) -> int:
        """The highest version any of the groups reflects (0 without groups)."""
        return max((g.reflects for g in self.groups), default=0)

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return {**_plain(dataclasses.asdict(self)), "reflects": self.reflects}


@dataclass(frozen=True)
class EntityRow:
    """One merged row of an entity: its full key, its live cells and their highest write time."""

    key: dict[str, CellValue]
    cells: dict[str, CellValue]
    version: int


@dataclass(frozen=True)
class Entity:
    """One entity by its partition key: its rows per source table, the current state of each
    state log (None: no state), the version mark of each view reading it, and ``reflects``: the
    highest of the marks and of the rows' write times (0 when nothing was ever written)."""

    table: str
    key: dict[str, CellValue]
    rows: dict[str, list[EntityRow]]
    states: dict[str, StateEntry | None]
    marks: dict[str, int]
    reflects: int
    precedence: dict[str, list[str]] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        """Whether any of its tables has a live row."""
        return any(self.rows.values())

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values."""
        return {**_plain(dataclasses.asdict(self)), "found": self.found}


def split_pair(text: str, what: str) -> tuple[str, str]:
    """``NAME=VALUE`` (or ``NAME:=JSON``) as ``(NAME, VALUE)`` / ``(NAME:, JSON)``; QueryError otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip(":"):
        raise QueryError(f"{what} {text!r}: expected NAME=VALUE")
    return name, value


def parse_group(pairs: Iterable[tuple[str, str]]) -> dict[str, CellValue]:
    """Group-key values from text pairs: ``(name, text)`` is the string ``text``; a name ending in
    ``:`` takes JSON (``("n:", "3")`` is the number 3). QueryError for bad JSON or a repeated name."""
    out: dict[str, CellValue] = {}
    for name, text in pairs:
        value: CellValue = text
        if name.endswith(":"):
            name = name[:-1]
            try:
                value = json.loads(text)
            except ValueError:
                raise QueryError(f"group {name}: not JSON: {text!r}") from None
            if isinstance(value, dict | list):
                raise QueryError(f"group {name}: a group value is a string, number, boolean or null")
        if name in out:
            raise QueryError(f"group {name}: given twice")
        out[name] = value
    return out


def parse_key(schema: TableSchema, pairs: Iterable[tuple[str, str]]) -> dict[str, CellValue]:
    """The partition key of ``schema`` from text pairs, each value converted to its column's type;
    QueryError when a column is missing, unknown, repeated or its value does not convert."""
    columns = {c.name: c for c in schema.partition_key}
    out: dict[str, CellValue] = {}
    for name, text in pairs:
        column = columns.get(name)
        if column is None or name in out:
            problem = "given twice" if name in out else "not a partition key column"
            raise QueryError(f"key {name}: {problem} of {schema.name} ({list(columns)})")
        try:
            if column.type in ("bigint", "int"):
                out[name] = int(text)
            elif column.type == "double":
                out[name] = float(text)
            elif column.type == "boolean":
                out[name] = {"true": True, "false": False}[text.lower()]
            elif column.type == "blob":
                out[name] = bytes.fromhex(text)
            else:
                out[name] = text
        except (ValueError, KeyError):
            raise QueryError(f"key {name}: {text!r} is not a {column.type}") from None
    missing = [c for c in columns if c not in out]
    if missing:
        raise QueryError(f"key of {schema.name}: missing {missing}")
    return out


def parse_precedence(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """State-log precedences from text pairs ``(table, "s1,s2,...")``, lowest first."""
    return {table: [s for s in states.split(",") if s] for table, states in pairs}


def _is_state_log(schema: TableSchema) -> bool:
    key = tuple((c.name, c.type) for c in schema.clustering_key)
    return key == _STATE_LOG_KEY and any(c.name == "state" for c in schema.columns)


class Queries:
    """The reads of ``views`` (an app's projections and aggregates, ``App.views``) over ``store``;
    ``clock`` (epoch seconds) decides which windows are final."""

    def __init__(
        self, store: WideColumnStore, views: Sequence[Projection], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store, self.views, self.clock = store, tuple(views), clock
        self.aggregates = {v.name: v for v in self.views if isinstance(v, Aggregate)}

    def aggregate(self, name: str) -> Aggregate:
        """The aggregate called ``name``; QueryError naming the known ones otherwise."""
        try:
            return self.aggregates[name]
        except KeyError:
            raise QueryError(f"no aggregate {name!r} (aggregates: {sorted(self.aggregates)})") from None

    def _series(self, agg: Aggregate, group: Mapping[str, CellValue]) -> tuple[dict[str, CellValue], str]:
        if set(group) != set(agg.group_by):
            raise QueryError(f"aggregate {agg.name} is grouped by {list(agg.group_by)}, not {sorted(group)}")
        ordered = {n: group[n] for n in agg.group_by}
        return ordered, series_id(list(ordered.values()))

    def _total(self, agg: Aggregate, group: dict[str, CellValue], row: Row) -> Total:
        window, end, final = self._span(agg, cell_int(row.key["window"]))
        return Total(
            agg.name, group, window, end, decode_measures(row.cells["measures"].value),
            cell_int(row.cells["members"].value), cell_int(row.cells["reflects"].value), final,
            _revisions(row),
        )  # fmt: skip

    def _span(self, agg: Aggregate, start: int) -> tuple[int | None, int | None, bool | None]:
        """A window's start, end and whether it is final (all None unwindowed)."""
        if agg.window is None:
            return None, None, None
        return start, start + agg.window.size_s, agg.is_final(start, self.clock())

    async def total(
        self, aggregate: str, group: Mapping[str, CellValue], window: float | None = None
    ) -> Total:
        """The totals of one group: its group-key values and, windowed, its window start (epoch s)."""
        agg = self.aggregate(aggregate)
        ordered, series = self._series(agg, group)
        start = self._window_start(agg, window)
        row = await self.store.read_row(tables_of(agg).totals.name, {"series": series, "window": start})
        if row is not None and "measures" in row.cells:
            return self._total(agg, ordered, row)
        window, end, final = self._span(agg, start)
        revisions = 0 if row is None else _revisions(row)  # a window emptied after it was final
        return Total(agg.name, ordered, window, end, reduce(agg.measures, ()), 0, 0, final, revisions, False)

    def _window_start(self, agg: Aggregate, window: float | None) -> int:
        if agg.window is None:
            if window is not None:
                raise QueryError(f"aggregate {agg.name} has no window: give no window start")
            return 0
        if window is None:
            raise QueryError(f"aggregate {agg.name} is windowed: give a window start")
        step = agg.window.step
        if window != math.floor(window) or int(window) % step:
            starts = agg.window.starts(window)
            raise QueryError(f"{window:g} is not a window start of {agg.name} (windows start every {step}s;"
                             f" those holding it start at {starts})")  # fmt: skip
        return int(window)

    async def windows(
        self,
        aggregate: str,
        group: Mapping[str, CellValue],
        since: float | None = None,
        until: float | None = None,
    ) -> Windows:
        """The windows of one series starting in [``since``, ``until``) (epoch s; None: unbounded):
        one read of the series' partition of ``<name>_totals``, bounded on its ``window`` column."""
        agg = self.aggregate(aggregate)
        if agg.window is None:
            raise QueryError(f"aggregate {agg.name} has no window: ask for its total")
        if since is not None and until is not None and until < since:
            raise QueryError(f"until ({until:g}) is before since ({since:g})")
        ordered, series = self._series(agg, group)
        start = None if since is None else [math.ceil(since)]
        end = None if until is None else [math.ceil(until) - 1]
        rows = await self.store.read_partition(tables_of(agg).totals.name, {"series": series},
                                               start=start, end=end)  # fmt: skip
        found = [self._total(agg, ordered, r) for r in rows if "measures" in r.cells]
        return Windows(agg.name, ordered, since, until, found)

    async def top(self, aggregate: str, by: str, limit: int = 10, window: float | None = None) -> Top:
        """The ``limit`` groups with the largest measure ``by``, of one window start when ``window``
        is given. Ties come in the order of the group's series id (``series_id``: its group-key
        values as compact ASCII JSON) compared as text, then by window start: ``["Zed"]`` before
        ``["apple"]``, ``[10]`` before ``[9]``, strings before numbers before null and booleans.
        Cost: a scan of all of ``<name>_totals`` (one row per group and window: reads grow with the
        number of groups, memory with ``limit``)."""
        agg = self.aggregate(aggregate)
        if by not in agg.measures:
            raise QueryError(f"aggregate {agg.name} has no measure {by!r} (measures: {list(agg.measures)})")
        if limit < 1:
            raise QueryError(f"limit must be at least 1, not {limit}")
        start = None if window is None else self._window_start(agg, window)
        scanned, best = 0, []
        async for row in self.store.scan(tables_of(agg).totals.name):
            scanned += 1
            if "measures" not in row.cells or (start is not None and cell_int(row.key["window"]) != start):
                continue
            value = decode_measures(row.cells["measures"].value).get(by)
            if value is not None:
                best.append((value, str(row.key["series"]), cell_int(row.key["window"]), row))
        chosen = heapq.nsmallest(limit, best, key=lambda b: (-b[0], b[1], b[2]))
        groups = [self._total(agg, dict(zip(agg.group_by, parse_series(s), strict=True)), r)
                  for _, s, _, r in chosen]  # fmt: skip
        return Top(agg.name, by, limit, start, groups, scanned)

    def source_tables(self) -> dict[str, TableSchema]:
        """Every table a view reads, by name."""
        return {t.name: t for v in self.views for t in v.tables}

    def source_table(self, name: str) -> TableSchema:
        """The source table ``name``; QueryError naming the source tables otherwise."""
        tables = self.source_tables()
        if name not in tables:
            raise QueryError(f"{name!r} is no source table of a projection or aggregate ({sorted(tables)})")
        return tables[name]

    async def entity(
        self,
        table: str,
        key: Mapping[str, CellValue],
        precedence: Mapping[str, Sequence[str]] | None = None,
    ) -> Entity:
        """One entity by the partition ``key`` of a source ``table``: its rows in every source table
        of the views reading ``table``, the current state of those that are state logs (``precedence``
        per table: the states' order at the same ``at``), and the views' version marks."""
        schema = self.source_table(table)
        order = {t: list(p) for t, p in (precedence or {}).items()}
        unknown = sorted(set(order) - set(self.source_tables()))
        if unknown:
            raise QueryError(f"precedence for {unknown}: not source tables")
        views = [v for v in self.views if table in v.source_names]
        schemas = list({t.name: t for v in views for t in v.tables}.values())
        pkey = dict(key)
        try:
            schema.check_key(pkey, partition_only=True)
        except SchemaError as exc:
            raise QueryError(str(exc)) from None
        parts, marks = await asyncio.gather(
            asyncio.gather(*(self.store.read_partition(s.name, pkey) for s in schemas)),
            _marks(self.store, views, pkey),
        )
        rows: dict[str, list[EntityRow]] = {}
        states: dict[str, StateEntry | None] = {}
        for schema, found in zip(schemas, parts, strict=True):
            live = [r for r in found if r.cells]
            rows[schema.name] = [EntityRow(dict(r.key), r.values(), r.version) for r in live]
            if _is_state_log(schema):
                states[schema.name] = current_state(live, order.get(schema.name, ()))
        newest = max((r.version for rs in rows.values() for r in rs), default=0)
        reflects = max([newest, *marks.values()])
        return Entity(table, pkey, rows, states, marks, reflects, order)


def _revisions(row: Row) -> int:
    """The ``revisions`` of a totals row (0 without the cell)."""
    cell = row.cells.get("revisions")
    return 0 if cell is None else cell_int(cell.value)


async def _marks(
    store: WideColumnStore, views: Sequence[Projection], key: Mapping[str, CellValue]
) -> dict[str, int]:
    """The version mark of partition ``key`` in each view's version table (0 without one)."""
    found = await asyncio.gather(*(store.read_row(v.version_table.name, key) for v in views))
    out = {}
    for v, mark in zip(views, found, strict=True):
        cell = None if mark is None else mark.cells.get("version")
        out[v.name] = 0 if cell is None else cell.writetime
    return out
