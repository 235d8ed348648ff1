"""``verify``: prove there is no residue of a subject anywhere converge keeps data.

It searches, for the subject's value as given and as its kind normalises
it, each as a whole token (case-insensitive, ``declare.mentions``): every
text cell and text key of every table of the app (also undeclared
columns: a residue there means a declaration is missing; the values ID
mutation recorded in ``converge_id_routes`` decoded), every document
of every projection, every record of the dead-letter WAL (all statuses,
and unindexed segment files; a damaged segment cannot be proven clean and
counts as residue), the named export files, the delivery ledger and the
notification entries. It also checks that the subject is on the app's
deny-list (else a replay would bring it
back). Each residue names the place, never the value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.erasure.declare import Subject
from framework.erasure.find import declared_for, finder, record_finder, spellings
from framework.erasure.keyed import subject_hash
from framework.erasure.tables import DENYLIST_TABLE, ERASURE_TABLES
from framework.idmutation.routes import ROUTES_TABLE, record_texts
from stores.objects.store import ObjectStore

__all__ = ["Residue", "verify"]


@dataclass(frozen=True)
class Residue:
    """Where a trace of the subject is left: ``place`` (store, index, dlq, export, ledger,
    notifications, denylist) and ``where`` (table or alias and a redacted key, file, ...)."""

    place: str
    where: str


def _redact(text: str, find: Any) -> str:
    return "<subject>" if find(text) else text


async def _store(app: Any, store: Any, find: Any, out: list[Residue]) -> None:
    skip = {t.name for t in ERASURE_TABLES}
    tables = [t.name for t in app.tables if t.name not in skip]
    if app.notifications is not None:
        from framework.notifications.schema import NOTIFICATION_TABLE

        tables.append(NOTIFICATION_TABLE.name)
    if app.delivery is not None:
        tables += [app.delivery.table, app.delivery.index_table]
    for table in tables:
        place = "notifications" if table.startswith("converge_notification") else "store"
        if app.delivery is not None and table in (app.delivery.table, app.delivery.index_table):
            place = "ledger"
        async for row in store.scan(table):
            texts = [str(v) for v in row.key.values() if isinstance(v, str)]
            texts += [c.value for c in row.cells.values() if isinstance(c.value, str)]
            if table == ROUTES_TABLE.name:  # values stored behind a kind letter
                texts += record_texts(row.key, row.cells["value"].value if "value" in row.cells else None)
            if any(find(t) for t in texts):
                redacted = {k: _redact(str(v), find) for k, v in row.key.items()}
                key = json.dumps(redacted, sort_keys=True)
                out.append(Residue(place, f"{table} {key}"))


async def _index(app: Any, index: Any, find: Any, out: list[Residue]) -> None:
    for p in app.projections:
        await index.refresh(p.alias)
        async for hit in index.scan(p.alias):
            if find(json.dumps(dict(hit.source), ensure_ascii=False, default=str)):
                out.append(Residue("index", f"{p.alias} {hit.doc_id}"))


def _dlq(
    dlq_root: str | Path | None, objects: ObjectStore | None, values: Sequence[str], out: list[Residue]
) -> None:
    from framework.dlq.erase import matching_records, parked_stores

    with parked_stores(dlq_root, objects) as stores:
        for store in stores:
            for path, lsn in matching_records(store, record_finder(*values)):
                out.append(Residue("dlq", f"{path} lsn {lsn}"))
            for health in store.check_all():
                if health.damaged:
                    out.append(Residue("dlq", f"{health.segment.path}: damaged, cannot be proven clean"))


def _exports(paths: Sequence[str | Path], values: Sequence[str], out: list[Residue]) -> None:
    from framework.dlq.erase import export_files
    from framework.dlq.export import read_export

    matches = record_finder(*values)
    for target in paths:
        for f in export_files(target):
            for n, (obj, rec) in enumerate(read_export(f)):
                if matches(rec):
                    out.append(Residue("export", f"{f} record {n} (lsn {obj.get('lsn')})"))


async def verify(
    app: Any,
    subject: Subject,
    *,
    key: bytes,
    store: Any,
    index: Any | None = None,
    dlq_root: str | Path | None = None,
    dlq_objects: ObjectStore | None = None,
    exports: Sequence[str | Path] = (),
) -> list[Residue]:
    """Every residue of ``subject`` (empty: none found); see the module docstring."""
    declared = declared_for(app, subject.kind)
    spelled = spellings(app, subject)
    find = finder(*spelled)
    out: list[Residue] = []
    await _store(app, store, find, out)
    hashed = subject_hash(key, subject.kind, declared[0].norm(subject.value))
    await store.ensure_table(DENYLIST_TABLE)
    if await store.read_row(DENYLIST_TABLE.name, {"app": app.name, "subject": hashed}) is None:
        text = f"{app.name}: subject not on the deny-list (a replay would restore it)"
        out.append(Residue("denylist", text))
    if index is not None:
        await _index(app, index, find, out)
    _dlq(dlq_root, dlq_objects, spelled, out)
    _exports(exports, spelled, out)
    return out
