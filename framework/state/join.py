"""The join book: which events read which lookup entries, and which wait for one.

``JoinBook`` keeps, in a ``KV`` (RocksDB in the worker, memory in the test
driver), per event that an agent with lookups mapped or parked as pending:

- ``E|p|event_id``: the event's raw JSON, the rows its mappings wrote
  (``rows``), the entries it read with their versions and value
  fingerprints (``reads``; so ``settled`` notices a value replaced at the
  same version), the entry it waits for (``wait``), a sequence number and
  whether its last mapping is durable (``done``; presumed by the batch path
  for events not yet acknowledged, see ``plan``);
- ``I|lookup|key|p|event_id``: an index from each entry to its readers
  (``R``) and its waiting events (``P``), to map them again when it changes;
- ``P|p|event_id``: the pending events, for bounds and reports.

Only the ``E`` records go to the changelog (``logged``); ``restore`` rebuilds
the index and the pending keys from them.

Each record also keeps the version its last mapping was planned at (``w``):
the version rule (``framework.state.version_rule.remap_version``) writes a
first mapping at the event's version (as ``map_with_state`` does for the Spark
backfill) and a re-mapping that read other entries one above that, so it never
lands at or below a write it replaces. The rows an earlier mapping wrote and
the new one does not (the entry moved the row, e.g. to another parent's key)
get cell tombstones over the columns written there, at the new write version.
Like ``map_event``, ``plan`` passes a mapping through the ID resolution, then
the erasure screen (``screen``), then adds the version marks, so a first
mapping and every re-mapping drop an erased subject's writes. The marks are at
version 0 (``join_marks``): the partitions a join touches on its way depend on
the arrival order (the ones it moved rows away from), so they record that the
partition has a mark and raise no document version. Limits are in the
docs/how-to/lookups-and-joins.md.

Every method is synchronous: in the worker's event loop a plan and its
bookkeeping happen at once, so an entry that arrives while an event's
writes are in flight always finds the event registered as a reader.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.errors import BadMessage
from framework.core.events import Event
from framework.core.lookup import Entry, canonical
from framework.core.mutations import Delete, LogState, Mutation, Upsert
from framework.core.projection import Projection, mark_writers
from framework.runtime.errors import MessageError
from framework.state.kv import KV
from framework.state.version_rule import remap_version
from framework.state.view import Missing, StateView

__all__ = [
    "JoinConfig",
    "JoinBook",
    "Plan",
    "PendingFull",
    "map_with_state",
    "join_marks",
    "remap_version",
]

log = logging.getLogger(__name__)

SEP = "\x1f"
_MUTATIONS = (Upsert, Delete, LogState)


@dataclass(frozen=True)
class JoinConfig:
    """Bounds of the join state of one agent.

    ``max_pending``: events waiting for an entry; past it a new one is
    parked (``PendingFull``, stage ``lookup``), never dropped.
    ``max_readers_per_key``: readers remembered per entry; past it an event
    is still mapped, but not re-mapped when that entry changes (counted
    and logged). ``report_after_s``: a pending event older than this is
    reported as overdue (status, log).
    """

    max_pending: int = 100_000
    max_readers_per_key: int = 10_000
    report_after_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.max_pending < 1 or self.max_readers_per_key < 1 or self.report_after_s <= 0:
            raise ValueError("JoinConfig bounds must be positive")


class PendingFull(BadMessage):
    """The pending store is full: the event is parked instead of waiting."""


@dataclass
class Plan:
    """What one mapping of one event needs: the ``mutations`` to write (empty while it waits
    for ``pending``), and the bookkeeping ``JoinBook.commit`` settles once they are durable."""

    partition: int
    event: Event
    mutations: list[Mutation]
    pending: tuple[str, str] | None
    seq: int
    rows: list[list[Any]]
    #: the state keys this plan changed (their changelog records)
    keys: list[str] = dataclasses.field(default_factory=list)
    #: the saved record is already what ``commit`` would make it
    committed: bool = False


def _at(m: Mutation, version: int) -> Mutation:
    return m if m.version == version else dataclasses.replace(m, version=version)


def map_with_state(
    agent: Any, event: Event, view: StateView, projections: Sequence[Projection] = ()
) -> list[Mutation]:
    """``agent.handle(event, view)`` with every mutation at the event's version (no version marks).

    ``Missing`` propagates; anything else ``handle`` raises, or a result that is
    not a mutation, is ``MessageError`` at stage ``map``."""
    try:
        mutations = list(agent.handle(event, view))
        for m in mutations:
            if not isinstance(m, _MUTATIONS):
                raise TypeError(f"{agent.name}.handle returned {type(m).__name__}, not a mutation")
    except Missing:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a pure mapping is the message's
        raise MessageError("map", exc) from exc
    return [_at(m, event.version) for m in mutations]


def join_marks(projections: Sequence[Projection], mutations: Sequence[Mutation]) -> list[Mutation]:
    """The version marks of a join's ``mutations``: at version 0 (``Projection.version_marks``), so
    the partitions an earlier mapping wrote and a later one moved away from keep the version
    their other writers gave them, as when the event was mapped once with the final entries."""
    return [mark for p in mark_writers(projections) for mark in p.version_marks(mutations, at=0)]


def _rows(mutations: Iterable[Mutation]) -> dict[str, list[Any]]:
    """Rows written (not deleted) by ``mutations``: ``{row id: [table, key, columns]}``."""
    out: dict[str, list[Any]] = {}
    for m in mutations:
        if isinstance(m, LogState):
            m = m.as_upsert()
        if isinstance(m, Upsert):
            rid = m.table + SEP + canonical(dict(m.key))
            cols = set(out.get(rid, [None, None, []])[2]) | set(m.cells)
            out[rid] = [m.table, dict(m.key), sorted(cols)]
    return out


class JoinBook:
    """The join state of one agent (see the module docstring)."""

    def __init__(
        self,
        agent: Any,
        kv: KV,
        entries: Callable[[str, str], Entry | None],
        projections: Sequence[Projection] = (),
        config: JoinConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.agent = agent
        self.kv = kv
        self.entries = entries
        self.projections = tuple(projections)
        self.config = config or JoinConfig()
        self.clock = clock
        self.names = frozenset(lookup.name for lookup in agent.lookups)
        self.pending_count = sum(1 for _ in kv.scan("P" + SEP))
        self.readers_over_bound = 0
        #: the ID mutation resolution (``framework.idmutation.IdResolution``), set by the wiring
        self.resolve: Callable[[Event, list[Mutation]], list[Mutation]] | None = None
        #: the current erasure screen (``framework.erasure.ScreenHolder``: called for the screen, or
        #: None), set by the wiring and the test driver; applied after ``resolve``, as ``map_event`` does
        self.screen: Callable[[], Callable[[Event, list[Mutation]], list[Mutation]] | None] | None = None
        self._reader_counts: dict[tuple[str, str], int] = {}

    # -- keys -----------------------------------------------------------------
    @staticmethod
    def _ek(p: int, eid: str) -> str:
        return f"E{SEP}{p}{SEP}{eid}"

    @staticmethod
    def _ik(lookup: str, key: str, p: int, eid: str) -> str:
        return f"I{SEP}{lookup}{SEP}{key}{SEP}{p}{SEP}{eid}"

    @staticmethod
    def _pk(p: int, eid: str) -> str:
        return f"P{SEP}{p}{SEP}{eid}"

    def load(self, p: int, eid: str) -> dict[str, Any] | None:
        """The record of event ``eid`` of partition ``p`` (None when unknown)."""
        text = self.kv.get(self._ek(p, eid))
        return None if text is None else json.loads(text)

    # -- planning ---------------------------------------------------------------
    def plan(self, p: int, event: Event, raw: str, *, presume: bool = False) -> Plan:
        """Map ``event`` with the current entries and register it (as a reader of what it read,
        or as pending on the entry it misses). MessageError: the event is bad (park it).

        ``presume`` (the batch path, for an event not acknowledged until its writes and its
        record are durable, so planned again if they fail): the record says done already, for
        a changelog sent alongside the writes; it keeps the earlier mapping's rows until
        ``commit`` only when this mapping moved some."""
        prev = self.load(p, event.event_id)
        view = StateView(self.entries, self.names)
        try:
            mutations = map_with_state(self.agent, event, view)
        except Missing as miss:
            return self._wait(p, event, raw, prev, view, (miss.lookup, miss.key))
        reads = [[lk, k, e.version, e.fingerprint] for (lk, k), e in view.found.items()]
        same = prev is not None and sorted(map(tuple, prev["reads"])) == sorted(map(tuple, reads))
        w = remap_version(event.version, None if prev is None else prev.get("w"), same)
        if w != event.version:  # before the ID resolution: it resolves at the write version
            mutations = [_at(m, w) for m in mutations]
        if self.resolve is not None:  # owner ids to their final ids, at the write version
            mutations = self.resolve(event, mutations)
        screen = self.screen() if self.screen is not None else None
        if screen is not None:  # erased subjects' writes out, before rows and version marks
            mutations = screen(event, mutations)
        new_rows = _rows(mutations)
        prev_rows = {} if prev is None else {r[0] + SEP + canonical(r[1]): r for r in prev["rows"]}
        moved = [Delete(t, k, w, columns=tuple(c)) for rid, (t, k, c) in prev_rows.items()
                 if rid not in new_rows]  # fmt: skip
        mutations += moved
        try:
            mutations += join_marks(self.projections, mutations)
        except Exception as exc:  # noqa: BLE001 - as map_event: the message's
            raise MessageError("map", exc) from exc
        seq = 1 if prev is None else prev["seq"] + 1
        rows = list({**prev_rows, **new_rows}.values())  # both, until the new mapping is durable
        keys = self._save(p, event.event_id, prev, raw, rows, reads, None, seq, done=presume, w=w)
        plan = Plan(p, event, mutations, None, seq, list(new_rows.values()), keys)
        plan.committed = presume and not moved
        return plan

    def _wait(
        self,
        p: int,
        event: Event,
        raw: str,
        prev: dict[str, Any] | None,
        view: StateView,
        target: tuple[str, str],
    ) -> Plan:
        waiting = prev is not None and prev.get("wait") is not None
        if not waiting and self.pending_count >= self.config.max_pending:
            raise MessageError(
                "lookup",
                PendingFull(
                    f"{self.config.max_pending} events already wait for lookup entries; "
                    f"{event.event_id} needs {target[0]}[{target[1]!r}]: raise JoinConfig.max_pending "
                    "or publish the missing entries, then replay it from the dead-letter WAL"
                ),
            )
        seq = 1 if prev is None else prev["seq"] + 1
        rows = [] if prev is None else prev["rows"]
        reads = [[lk, k, e.version, e.fingerprint] for (lk, k), e in view.found.items()]
        last = None if prev is None else prev.get("w")
        keys = self._save(p, event.event_id, prev, raw, rows, reads, list(target), seq, done=True, w=last)
        return Plan(p, event, [], target, seq, rows, keys, committed=True)

    def _save(
        self,
        p: int,
        eid: str,
        prev: dict[str, Any] | None,
        raw: str,
        rows: list[Any],
        reads: list[list[Any]],
        wait: list[str] | None,
        seq: int,
        *,
        done: bool,
        w: int | None,
    ) -> list[str]:
        """Write the record (``w``: the version of its last planned mapping, None before the
        first), its index and pending entries; returns the keys changed."""
        now = self.clock()
        since = now
        if prev is not None and prev.get("wait") is not None and wait == prev["wait"]:
            since = prev["since"]
        record = {"raw": raw, "rows": rows, "reads": reads, "wait": wait, "since": since}
        record.update(seq=seq, done=done, w=w)
        keys = [self._ek(p, eid)]
        self.kv.put(keys[0], json.dumps(record, separators=(",", ":")))
        return keys + self._link(p, eid, prev, reads, wait, since)

    def _link(
        self,
        p: int,
        eid: str,
        prev: dict[str, Any] | None,
        reads: list[list[Any]],
        wait: list[str] | None,
        since: float,
    ) -> list[str]:
        """Index the record of ``eid`` by what it read and waits for (replacing ``prev``'s);
        returns the keys changed."""
        keys: list[str] = []
        old = self._index_of(prev)
        new = {(lk, k): "R" for lk, k, *_ in reads}
        if wait is not None:
            new[(wait[0], wait[1])] = "P"
        for lk, k in old.keys() - new.keys():
            keys.append(self._ik(lk, k, p, eid))
            self.kv.delete(keys[-1])
            self._count(lk, k, -1)
        for (lk, k), kind in new.items():
            if old.get((lk, k)) == kind:
                continue
            if (lk, k) not in old:
                if kind == "R" and self._count(lk, k, 0) >= self.config.max_readers_per_key:
                    self.readers_over_bound += 1
                    log.warning("lookup %s[%r] has %d readers already: %s is not re-mapped when it changes",
                                lk, k, self.config.max_readers_per_key, eid)  # fmt: skip
                    continue
                self._count(lk, k, +1)
            keys.append(self._ik(lk, k, p, eid))
            self.kv.put(keys[-1], kind)
        was_pending = prev is not None and prev.get("wait") is not None
        if wait is not None:
            keys.append(self._pk(p, eid))
            self.kv.put(keys[-1], json.dumps([wait[0], wait[1], since]))
            self.pending_count += 0 if was_pending else 1
        elif was_pending:
            keys.append(self._pk(p, eid))
            self.kv.delete(keys[-1])
            self.pending_count -= 1
        return keys

    @staticmethod
    def _index_of(record: dict[str, Any] | None) -> dict[tuple[str, str], str]:
        if record is None:
            return {}
        out: dict[tuple[str, str], str] = {(lk, k): "R" for lk, k, *_ in record["reads"]}
        if record.get("wait") is not None:
            out[(record["wait"][0], record["wait"][1])] = "P"
        return out

    def _count(self, lookup: str, key: str, delta: int) -> int:
        n = self._reader_counts.get((lookup, key))
        if n is None:
            n = sum(1 for _ in self.kv.scan(f"I{SEP}{lookup}{SEP}{key}{SEP}"))
        n = max(0, n + delta)
        self._reader_counts[(lookup, key)] = n
        return n

    def commit(self, plan: Plan) -> bool:
        """The plan's mutations are durable: its rows are all the event has live (unless a newer
        plan of the same event superseded it meanwhile). True when the record changed."""
        if plan.committed:
            return False
        record = self.load(plan.partition, plan.event.event_id)
        if record is None or record["seq"] != plan.seq:
            return False
        record["rows"], record["done"] = plan.rows, True
        self.kv.put(self._ek(plan.partition, plan.event.event_id), json.dumps(record, separators=(",", ":")))
        return True

    @staticmethod
    def logged(keys: Iterable[str]) -> list[str]:
        """The keys of ``keys`` that go to the changelog: the records (the index and the pending
        keys are rebuilt from them, ``restore``)."""
        return [k for k in keys if k.startswith("E" + SEP)]

    def restore(self, p: int, records: Iterable[tuple[str, str | None]]) -> int:
        """Replace partition ``p``'s state by a changelog's records (the last one of each key
        counts; index records of older changelogs are skipped); returns the records kept."""
        self.drop_partition(p)
        last: dict[str, str | None] = {}
        for key, value in records:
            if key.startswith(f"E{SEP}{p}{SEP}"):
                last[key] = value
        self.restored()
        kept = 0
        for key, value in last.items():
            if value is None:
                continue
            record = json.loads(value)
            self.kv.put(key, value)
            self._link(p, key.split(SEP, 2)[2], None, record["reads"], record.get("wait"), record["since"])
            kept += 1
        self.restored()
        return kept

    def restored(self) -> None:
        """Recount after the KV was filled from a changelog."""
        self.pending_count = sum(1 for _ in self.kv.scan("P" + SEP))
        self._reader_counts.clear()

    def forget(self, p: int, eid: str) -> list[str]:
        """Drop an event's record (it was parked); returns the keys deleted."""
        prev = self.load(p, eid)
        if prev is None:
            return []
        keys = [self._ik(lk, k, p, eid) for lk, k in self._index_of(prev)]
        for lk, k in self._index_of(prev):
            self._count(lk, k, -1)
        if prev.get("wait") is not None:
            keys.append(self._pk(p, eid))
            self.pending_count -= 1
        keys.append(self._ek(p, eid))
        for k in keys:
            self.kv.delete(k)
        return keys

    def drop_partition(self, p: int) -> None:
        """Forget partition ``p`` locally (no changelog): it moved to another worker."""
        for k, _ in self.kv.scan(f"E{SEP}{p}{SEP}"):
            self.forget(p, k.rsplit(SEP, 1)[1])

    # -- who to map again ---------------------------------------------------------
    def readers(self, lookup: str, key: str) -> list[tuple[int, str]]:
        """``(partition, event_id)`` of every event that read or waits for entry ``key``."""
        prefix = f"I{SEP}{lookup}{SEP}{key}{SEP}"
        out = []
        for k, _ in self.kv.scan(prefix):
            p, _, eid = k[len(prefix) :].partition(SEP)
            out.append((int(p), eid))
        return out

    def settled(self, record: dict[str, Any]) -> bool:
        """True when the record's last mapping is durable and used the current entries, versions
        and values (or it still waits for an entry that has not arrived)."""
        if record.get("wait") is not None:
            return self.entries(record["wait"][0], record["wait"][1]) is None
        if not record["done"]:
            return False
        for read in record["reads"]:
            entry = self.entries(read[0], read[1])
            if entry is None or entry.version != read[2]:
                return False
            if len(read) < 4 or entry.fingerprint != read[3]:  # a replacement at the same version
                return False
        return True

    def unsettled(self, partitions: Iterable[int]) -> list[tuple[int, str]]:
        """Events of ``partitions`` to map again (after a restart or a restore)."""
        out = []
        for p in partitions:
            prefix = f"E{SEP}{p}{SEP}"
            for k, text in self.kv.scan(prefix):
                if not self.settled(json.loads(text)):
                    out.append((p, k[len(prefix) :]))
        return out

    # -- reports --------------------------------------------------------------------
    def pending(self) -> list[tuple[int, str, str, str, float]]:
        """Every pending event: ``(partition, event_id, lookup, key, since)``."""
        out = []
        for k, text in self.kv.scan("P" + SEP):
            _, p, eid = k.split(SEP, 2)
            lk, key, since = json.loads(text)
            out.append((int(p), eid, lk, key, float(since)))
        return out

    def status(self, owns: Callable[[int], bool] = lambda p: True) -> dict[str, Any]:
        """Pending events per lookup (count, overdue past ``report_after_s``, oldest age in s) of
        the partitions ``owns`` accepts (a partition that moved away keeps its local copy)."""
        now = self.clock()
        zero = {"pending": 0, "overdue": 0, "oldest_s": 0.0}
        per: dict[str, dict[str, Any]] = {n: dict(zero) for n in self.names}
        pending = [item for item in self.pending() if owns(item[0])]
        for _, _, lk, _, since in pending:
            s = per.setdefault(lk, dict(zero))
            s["pending"] += 1
            age = now - since
            s["overdue"] += age > self.config.report_after_s
            s["oldest_s"] = round(max(s["oldest_s"], age), 1)
        return {"lookups": per, "pending": len(pending), "readers_over_bound": self.readers_over_bound}
