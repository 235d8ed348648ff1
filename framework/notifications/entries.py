"""Notification entries: what one writer's micro-batch changed, per (tenant, bucket, table).

``notification_mutations`` is pure: the same batch (mutations, batch id,
ingestion time) gives the same rows, so writing it again is idempotent.

Counting, per row key of a batch (the row's last mutation by version decides;
on a tie a delete wins, as in the store):

- ``deleted``: the last mutation is a row or partition ``Delete`` (a
  partition tombstone counts once, under its partition key); a ``Delete`` of
  some columns is a write of the row;
- ``inserted``: a row written (``Upsert``, ``LogState``) that had no live
  row before the batch, as ``existed`` tells; without ``existed`` (a blind
  writer that reads nothing) a ``LogState`` row counts as inserted (a new
  row of the log) and an ``Upsert`` as updated;
- ``updated``: any other written row.

A redelivered batch is a new ingestion (a later ``ingested_at``): its rows
existed by then, so it may count them as updated; its keys are the same. A
writer that re-runs a batch at the *same* ingestion time (a job replaying a
recorded batch) must get the same counts, so it counts blind (no ``existed``):
two different entries at one position would be merged cell by cell.

A batch that changed more keys of one (tenant, table) than one entry lists (``max_keys``,
``MAX_KEYS_BYTES``) has them listed in consecutive slices, one entry each (``part_id``: the
batch id, then ``#2``, ``#3``...), so a consumer reads the keys rather than the whole table; only
past ``MAX_PARTS`` entries (a bulk load) does one entry say re-read.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.mutations import CellValue, Delete, LogState, Mutation, Upsert
from framework.core.rows import Row, cell_int
from framework.notifications.schema import (
    BUCKETS_TABLE,
    DEFAULT_BUCKET_WIDTH,
    DEFAULT_TENANT,
    NOTIFICATION_TABLE,
    bucket_of,
    check_bucket_width,
    day_of,
)

__all__ = [
    "Entry",
    "Key",
    "TenantOf",
    "TENANT_COLUMNS",
    "MAX_KEYS_BYTES",
    "MAX_PARTS",
    "part_id",
    "default_tenant_of",
    "fixed_tenant",
    "notification_mutations",
    "entry_from_row",
    "batch_id_of",
    "encode_keys",
    "changed_row",
    "changed_rows",
    "entry_mutations",
    "RowChange",
    "key_ident",
    "decode_keys",
]

#: A row's primary key (or a partition key, for a partition tombstone).
Key = dict[str, CellValue]
#: ``tenant_of(table, key)``: the tenant a row belongs to, or None for the default tenant.
TenantOf = Callable[[str, Mapping[str, CellValue]], "str | None"]
#: Key columns naming a tenant when the app declares no ``tenant_of``, first match wins.
TENANT_COLUMNS = ("org_id", "tenant", "tenant_id")
#: Largest JSON of an entry's keys; a longer list goes in several entries (``MAX_PARTS``).
MAX_KEYS_BYTES = 256 * 1024
#: Most entries one batch's changed keys of one (tenant, table) are listed in; past it (or with
#: ``max_keys`` 0) one entry says re-read instead.
MAX_PARTS = 64
_OWN = frozenset(t.name for t in (NOTIFICATION_TABLE, BUCKETS_TABLE))


def default_tenant_of(table: str, key: Mapping[str, CellValue]) -> str | None:
    """The value of the key's ``org_id``, ``tenant`` or ``tenant_id`` column, else None."""
    for column in TENANT_COLUMNS:
        value = key.get(column)
        if value is not None:
            return str(value)
    return None


def fixed_tenant(tenant: str | None) -> TenantOf:
    """A ``tenant_of`` that names ``tenant`` for every row."""

    def tenant_of(table: str, key: Mapping[str, CellValue]) -> str | None:
        return tenant

    return tenant_of


@dataclass(frozen=True)
class Entry:
    """One notification: ``table`` of ``tenant`` changed by ``app``'s batch ``batch_id``,
    ingested at ``ingested_at`` (bucket ``bucket``), highest version written
    ``last_modified``. ``keys`` lists the changed row keys, or is None with ``reread``
    True: re-read this tenant's rows of ``table``."""

    tenant: str
    bucket: int
    ingested_at: int
    app: str
    batch_id: str
    table: str
    last_modified: int
    inserted: int
    updated: int
    deleted: int
    keys: tuple[Key, ...] | None
    reread: bool

    @property
    def position(self) -> tuple[int, str, str, str, str]:
        """Where the entry is in the reading order: ingestion time, then tenant, app, batch, table."""
        return (self.ingested_at, self.tenant, self.app, self.batch_id, self.table)

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able data (bytes key values as ``{"$bytes": base64}``)."""
        return {
            "tenant": self.tenant, "bucket": self.bucket, "ingested_at": self.ingested_at,
            "app": self.app, "batch_id": self.batch_id, "table": self.table,
            "last_modified": self.last_modified, "inserted": self.inserted, "updated": self.updated,
            "deleted": self.deleted, "reread": self.reread,
            "keys": None if self.keys is None else [_jsonable(k) for k in self.keys],
        }  # fmt: skip


def batch_id_of(prefix: str, event_ids: Iterable[str]) -> str:
    """A batch id for a batch of events: ``prefix`` and a digest of the set of their ids."""
    text = "\n".join(sorted(set(event_ids)))
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12)
    return f"{prefix}:{digest.hexdigest()}"


def _jsonable(key: Mapping[str, CellValue]) -> Mapping[str, Any]:
    for v in key.values():
        if isinstance(v, bytes):
            return {c: {"$bytes": base64.b64encode(v).decode()} if isinstance(v, bytes) else v
                    for c, v in key.items()}  # fmt: skip
    return key


_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_quote = json.encoder.encode_basestring_ascii


def key_ident(key: Mapping[str, CellValue]) -> str:
    """A key as canonical JSON text (sorted columns, no spaces, bytes as ``{"$bytes": base64}``):
    equal keys, equal texts; exactly ``json.dumps(..., sort_keys=True, separators=(",", ":"))``."""
    parts = []
    for column in sorted(key):
        v = key[column]
        if isinstance(v, str):
            text = _quote(v)
        elif isinstance(v, bool) or not isinstance(v, int):
            return _encode(_jsonable(key))
        else:
            text = str(v)
        parts.append(f"{_quote(column)}:{text}")
    return "{" + ",".join(parts) + "}"


def encode_keys(keys: Iterable[Mapping[str, CellValue]]) -> str:
    """Keys as a canonical JSON list (``key_ident`` of each, sorted, once each)."""
    return "[" + ",".join(sorted({key_ident(k) for k in keys})) + "]"


def decode_keys(text: str) -> tuple[Key, ...]:
    """``encode_keys`` inverted."""
    out = []
    for raw in json.loads(text):
        out.append({c: base64.b64decode(v["$bytes"]) if isinstance(v, dict) else v for c, v in raw.items()})
    return tuple(out)


def changed_row(m: Mutation) -> tuple[Key, str]:
    """The key of the row ``m`` changes and its kind: ``write``, ``log`` (a state-log row) or
    ``delete``."""
    if isinstance(m, LogState):
        return {**m.key, "at": m.at, "event_id": m.event_id}, "log"
    if isinstance(m, Delete):
        return dict(m.key), "delete" if m.columns is None else "write"  # cell tombstones change a row
    return dict(m.key), "write"


#: A changed row of a batch: its deciding mutation's version, whether that is a delete, the
#: kind (``changed_row``) and the key.
RowChange = tuple[int, bool, str, Key]


def changed_rows(written: Iterable[Mutation]) -> dict[tuple[str, str], RowChange]:
    """The rows ``written`` changes, by ``(table, key_ident(key))``, each with its deciding
    mutation (the highest version; on a tie the delete). Notification tables are left out."""
    rows: dict[tuple[str, str], RowChange] = {}
    for m in written:
        if m.table in _OWN:
            continue
        key, kind = changed_row(m)
        ident = (m.table, key_ident(key))
        seen = rows.get(ident)
        deletes = kind == "delete"
        if seen is None or (m.version, deletes) > (seen[0], seen[1]):
            rows[ident] = (m.version, deletes, kind, key)
    return rows


def notification_mutations(
    app_name: str,
    batch_id: str,
    written: Sequence[Mutation],
    tenant_of: TenantOf | None,
    ingested_at: int,
    max_keys: int = 1000,
    *,
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
    existed: Callable[[str, Mapping[str, CellValue]], bool] | None = None,
    ttl: int | None = None,
) -> list[Mutation]:
    """The notification rows of one micro-batch of writes (see the module docstring).

    One entry per (tenant, bucket, table) written, with its counts and changed keys; more than
    ``max_keys`` keys (or ``MAX_KEYS_BYTES`` of them) are listed in several entries, each with
    the counts and the highest version of its keys (batch ids ``part_id``), and past
    ``MAX_PARTS`` such entries (or with ``max_keys`` 0) one entry says ``reread`` instead;
    plus the bucket-index rows. ``tenant_of`` None means ``default_tenant_of``. Written
    at version ``ingested_at``, expiring after ``ttl`` seconds when given. Writes to the
    notification tables themselves are not announced.
    """
    rows = changed_rows(written)
    live = None
    if existed is not None:
        live = {
            ident for ident, (_, _, kind, key) in rows.items() if kind != "delete" and existed(ident[0], key)
        }
    return entry_mutations(app_name, batch_id, rows, tenant_of, ingested_at, max_keys,
                           bucket_width=bucket_width, live=live, ttl=ttl)  # fmt: skip


def part_id(batch_id: str, part: int) -> str:
    """The batch id of an entry listing the ``part``-th (from 0) slice of a batch's keys of one
    (tenant, table): ``batch_id`` for the first, ``batch_id#2``, ``#3``... for the next."""
    return batch_id if part == 0 else f"{batch_id}#{part + 1}"


_Change = tuple[int, str, str]  # version, kind, key ident


def _parts(changes: Sequence[_Change], max_keys: int) -> list[Sequence[_Change]] | None:
    """``changes`` (sorted by key) in consecutive slices of at most ``max_keys`` keys whose JSON
    list is at most ``MAX_KEYS_BYTES``; None when that takes more than ``MAX_PARTS`` slices (or
    ``max_keys`` is 0, or one key alone is too long)."""
    if max_keys < 1:
        return None
    parts: list[Sequence[_Change]] = []
    start, size = 0, 2  # the brackets
    for i, (_, _, ident) in enumerate(changes):
        more = len(ident) + (1 if i > start else 0)
        if i > start and (i - start >= max_keys or size + more > MAX_KEYS_BYTES):
            parts.append(changes[start:i])
            if len(parts) >= MAX_PARTS:
                return None
            start, size, more = i, 2, len(ident)
        size += more
        if size > MAX_KEYS_BYTES:
            return None
    parts.append(changes[start:])
    return parts if len(parts) <= MAX_PARTS else None


def entry_mutations(
    app_name: str,
    batch_id: str,
    rows: Mapping[tuple[str, str], RowChange],
    tenant_of: TenantOf | None,
    ingested_at: int,
    max_keys: int = 1000,
    *,
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
    live: Collection[tuple[str, str]] | None = None,
    ttl: int | None = None,
) -> list[Mutation]:
    """``notification_mutations`` from ``changed_rows``; ``live``: the ``(table, ident)`` of
    the rows that had a live row before the batch (None: count blind)."""
    check_bucket_width(bucket_width)
    tenant_of = tenant_of or default_tenant_of
    bucket = bucket_of(ingested_at, bucket_width)
    groups: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
    for (table, ident), (version, _, kind, key) in rows.items():
        if kind != "delete" and live is not None:
            kind = "updated" if (table, ident) in live else "inserted"
        tenant = tenant_of(table, key)
        group = (DEFAULT_TENANT if tenant is None else str(tenant), table)
        groups.setdefault(group, []).append((version, kind, ident))
    blind = {"delete": "deleted", "log": "inserted", "write": "updated"}
    # an index row lives as long as the last entry its bucket may get
    index_ttl = None if ttl is None else ttl + -(-bucket_width // 1_000_000)
    out: list[Mutation] = []
    for (tenant, table), changes in sorted(groups.items()):
        changes.sort(key=lambda change: change[2])
        parts = _parts(changes, max_keys)
        for i, part in enumerate(parts or [changes]):
            counts = {"inserted": 0, "updated": 0, "deleted": 0}
            for _, kind, _ in part:
                counts[blind.get(kind, kind)] += 1
            keys = None if parts is None else "[" + ",".join(ident for _, _, ident in part) + "]"
            entry_key: Key = {"tenant": tenant, "bucket": bucket, "ingested_at": ingested_at, "app": app_name,
                              "batch_id": part_id(batch_id, i), "table_name": table}  # fmt: skip
            last = max(v for v, _, _ in part)
            cells: dict[str, CellValue] = {"last_modified": last, **counts, "keys": keys,
                                           "reread": keys is None}  # fmt: skip
            out.append(Upsert(NOTIFICATION_TABLE.name, entry_key, cells, ingested_at, ttl))
        index_key: Key = {"day": day_of(bucket), "bucket": bucket, "tenant": tenant}
        out.append(Upsert(BUCKETS_TABLE.name, index_key, {"width": bucket_width}, ingested_at, index_ttl))
    return out


def entry_from_row(row: Row) -> Entry:
    """The entry a row of ``converge_notifications`` holds."""
    k, c = row.key, row.values()
    keys = c.get("keys")
    return Entry(
        tenant=str(k["tenant"]), bucket=cell_int(k["bucket"]), ingested_at=cell_int(k["ingested_at"]),
        app=str(k["app"]), batch_id=str(k["batch_id"]), table=str(k["table_name"]),
        last_modified=int(c.get("last_modified") or 0), inserted=int(c.get("inserted") or 0),
        updated=int(c.get("updated") or 0), deleted=int(c.get("deleted") or 0),
        keys=None if keys is None else decode_keys(str(keys)), reread=bool(c.get("reread")),
    )  # fmt: skip
