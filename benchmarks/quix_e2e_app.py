"""The Quix Streams side of the end-to-end pair (issue 44): run by the scratch venv's interpreter only.

Not part of converge's import graph: ``benchmarks.e2e_peer`` starts it as
``<scratch venv>/bin/python benchmarks/quix_e2e_app.py ARGS`` (quixstreams with its
``elasticsearch`` extra lives in that venv, never in the project's). Standard library and
quixstreams only.

The work is the demo's for the activity events (``activity-events``: emails and meetings
created, updated, rescheduled, cancelled): per hub row (the message key
``<org_id>:<hub_id>``) the row's cells in RocksDB state (``sdf.apply(..., stateful=True)``,
changelog topic on, at-least-once, checkpointed commits every ``--commit-interval`` s), each
cell last-write-wins by the event's version, a cancellation shadowing every cell written at or
below its version (as converge's ``ActivitiesAgent`` and its store do); then the row's document
as converge's ``ActivityProjection`` builds it (live cells, ``participants`` as a list,
``has_record``), or converge's tombstone marker ``{"converge_tombstone": true}`` when no cell
is live, written with quixstreams' ``ElasticsearchSink`` (bulk ``index`` of every output, id the
hub id, flushed at each checkpoint before the offsets are committed) into noida-db's
Elasticsearch API. The sink's client waits up to ``--request-timeout`` s for a request (60; the
client's default 10 s) and retries a timed-out one (``retry_on_timeout``, 3 times): on the shared
2-core machine under load a bulk request once took longer than 10 s and the app died with
``ConnectionTimeout`` (converge's runtime redelivers a failed batch instead). Runs until SIGTERM
or SIGINT (Quix stops gracefully on both).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

#: The ``status`` cell a record write sets, by event type (converge's ``ActivitiesAgent``).
STATUS = {"email.created": "sent", "meeting.created": "scheduled", "meeting.rescheduled": "rescheduled"}
CONTENT = ("subject", "body_preview", "starts_at", "ends_at")
TOMBSTONE_FIELD = "converge_tombstone"


def hub_of(key: Any) -> str:
    """The hub id of a message key ``<org_id>:<hub_id>``."""
    text = key.decode() if isinstance(key, bytes) else str(key)
    return text.rsplit(":", 1)[1]


def record_cells(value: dict[str, Any]) -> dict[str, Any]:
    """The cells an email or meeting event (not a cancellation) writes to its hub row."""
    p, kind = value["payload"], value["type"]
    cells: dict[str, Any] = {"org_id": p["org_id"], "source": p["source"],
                             "external_id": p["external_id"], "kind": kind.partition(".")[0]}  # fmt: skip
    for name in CONTENT:
        if name in p:
            cells[name] = p[name]
    if "participants" in p:
        cells["participants"] = ",".join(sorted({a.lower() for a in p["participants"]})) or None
    if "sent_at" in p:
        cells["starts_at"] = p["sent_at"]
    if kind in STATUS:
        cells["status"] = STATUS[kind]
    return cells


def fold(value: dict[str, Any], key: Any, timestamp: int, headers: Any, state: Any) -> dict[str, Any]:
    """The event folded into its hub row's state; the row's document (or the tombstone marker)."""
    row = state.get("row") or {"cells": {}, "dead": -1}
    cells: dict[str, list[Any]] = row["cells"]
    version = value["version"]
    if value["type"] == "meeting.cancelled":
        if version > row["dead"]:
            row["dead"] = version
            cells = row["cells"] = {k: c for k, c in cells.items() if c[1] > version}
    elif version > row["dead"]:
        for name, cell in record_cells(value).items():
            old = cells.get(name)
            if old is None or old[1] < version:
                cells[name] = [cell, version]
    state.set("row", row)
    live = {k: c[0] for k, c in cells.items() if c[0] is not None}
    if not live:
        return {TOMBSTONE_FIELD: True}
    doc: dict[str, Any] = {"hub_id": hub_of(key)}
    for name, cell in sorted(live.items()):
        doc[name] = cell.split(",") if name == "participants" else cell
    doc["has_record"] = "kind" in live
    return doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--es-url", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--mappings", required=True, help="the index's mappings, JSON")
    ap.add_argument("--commit-interval", type=float, default=5.0)
    ap.add_argument("--request-timeout", type=float, default=60.0)
    args = ap.parse_args()

    from quixstreams import Application
    from quixstreams.sinks.community.elasticsearch import ElasticsearchSink

    app = Application(
        broker_address=args.broker,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        commit_interval=args.commit_interval,
        loglevel="WARNING",
    )
    topic = app.topic(args.topic, value_deserializer="json", key_deserializer="str")
    sink = ElasticsearchSink(
        url=args.es_url,
        index=args.index,
        mapping={"mappings": json.loads(args.mappings)},
        document_id_setter=lambda item: hub_of(item.key),
        request_timeout=args.request_timeout,
        retry_on_timeout=True,
    )
    sdf = app.dataframe(topic)
    sdf = sdf.apply(fold, stateful=True, metadata=True)
    sdf.sink(sink)
    app.run()


if __name__ == "__main__":
    main()
